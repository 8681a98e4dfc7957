package config

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the configuration's Go types")

// TestConfigurationReference proves docs/configuration.md is the reference
// of every key app.yml and .github/driftback.yml take, generated from the
// configuration's Go types and their comments: a key added, renamed or
// removed, or a comment changed, fails here until the reference is
// regenerated (go test ./app/config -run TestConfigurationReference -update).
// Every key must have a comment.
func TestConfigurationReference(t *testing.T) {
	ref, undocumented := configurationReference(t)
	for _, k := range undocumented {
		t.Errorf("%s has no comment to document it", k)
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(path, []byte(ref), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != ref {
		t.Errorf("docs/configuration.md is not the reference the configuration's types give: regenerate it with\n  go test ./app/config -run TestConfigurationReference -update")
	}
}

// refRow is one key of the reference.
type refRow struct{ key, kind, doc string }

// typeSource is the Go source of the configuration's types, by package.
type typeSource map[string]map[string]*ast.TypeSpec

// configurationReference writes the reference, and lists the keys without
// a comment.
func configurationReference(t *testing.T) (string, []string) {
	t.Helper()
	src := typeSource{}
	for pkg, dir := range map[string]string{"config": ".", "drift": "../../drift", "object": "../../drift/object"} {
		src[pkg] = map[string]*ast.TypeSpec{}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.TYPE {
						continue
					}
					for _, s := range g.Specs {
						ts := s.(*ast.TypeSpec)
						if ts.Doc == nil && len(g.Specs) == 1 {
							ts.Doc = g.Doc
						}
						src[pkg][ts.Name.Name] = ts
					}
				}
			}
		}
	}
	var b strings.Builder
	var undocumented []string
	b.WriteString(`# Configuration reference

<!-- Generated from the configuration's Go types (app/config) and their comments by
     go test ./app/config -run TestConfigurationReference -update
     Edit the comments, not this file. -->

driftback reads its configuration from ` + "`app.yml`" + ` (` + "`driftback serve --config app.yml`" + `; the
repository's [app.yml](../app.yml) is a complete, commented example). Every value can be
overridden by an environment variable named after its path: ` + "`github.appID`" + ` is
` + "`DRIFTBACK_GITHUB_APP_ID`" + `, ` + "`targets[0].path`" + ` is ` + "`DRIFTBACK_TARGETS_0_PATH`" + `. Unknown keys and
wrong types are errors that name their line. Secrets are never written in app.yml: the
private key and the webhook secret come from the files named below, or from
` + "`DRIFTBACK_GITHUB_PRIVATE_KEY`" + ` and ` + "`DRIFTBACK_GITHUB_WEBHOOK_SECRET`" + `.

A repository refines the policy of its own targets in ` + "`.github/driftback.yml`" + ` on its default
branch (never read from a pull request); it cannot add a target, name a cluster or open
live data to forks.

Durations are Go durations (` + "`30s`, `5m`, `1h`" + `). In key paths, ` + "`NAME`" + ` is a key of your choosing
and ` + "`[]`" + ` an item of a list.
`)
	for _, part := range []struct{ title, pkg, typ string }{
		{"app.yml", "config", "Config"},
		{".github/driftback.yml", "config", "repoConfig"},
	} {
		rows := src.rows(part.pkg, src[part.pkg][part.typ].Type, "")
		fmt.Fprintf(&b, "\n## `%s`\n\n| key | type | what it sets |\n|---|---|---|\n", part.title)
		for _, r := range rows {
			if r.doc == "" {
				undocumented = append(undocumented, part.title+": "+r.key)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.key, r.kind, markdownCell(r.doc))
		}
	}
	return b.String(), undocumented
}

// rows lists the keys of a struct type, depth first.
func (s typeSource) rows(pkg string, typ ast.Expr, prefix string) []refRow {
	st, ok := typ.(*ast.StructType)
	if !ok {
		return nil
	}
	var out []refRow
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		doc := commentOf(f)
		kind, fieldPkg, inner, suffix := s.kindOf(pkg, f.Type)
		if doc == "" && inner != nil {
			doc = s.typeDoc(fieldPkg, f.Type)
		}
		out = append(out, refRow{key: key, kind: kind, doc: userWords(doc, f.Names[0].Name, name, st)})
		if inner != nil {
			out = append(out, s.rows(fieldPkg, inner, key+suffix)...)
		}
	}
	return out
}

// kindOf names a field's type for a reader, and returns the struct under
// it (a list's item, a map's value) with the key suffix that reaches it.
func (s typeSource) kindOf(pkg string, e ast.Expr) (kind, innerPkg string, inner ast.Expr, suffix string) {
	switch x := e.(type) {
	case *ast.StarExpr:
		return s.kindOf(pkg, x.X)
	case *ast.ArrayType:
		k, p, in, suf := s.kindOf(pkg, x.Elt)
		return "list of " + k, p, in, "[]" + suf
	case *ast.MapType:
		k, p, in, suf := s.kindOf(pkg, x.Value)
		return "map of " + k, p, in, ".NAME" + suf
	case *ast.SelectorExpr:
		q := x.X.(*ast.Ident).Name
		if q == "time" && x.Sel.Name == "Duration" {
			return "duration", "", nil, ""
		}
		if ts, ok := s[q][x.Sel.Name]; ok {
			return s.kindOf(q, ts.Type)
		}
		return x.Sel.Name, "", nil, ""
	case *ast.Ident:
		if ts, ok := s[pkg][x.Name]; ok {
			if _, isStruct := ts.Type.(*ast.StructType); isStruct {
				return "object", pkg, ts.Type, ""
			}
			return s.kindOf(pkg, ts.Type)
		}
		switch x.Name {
		case "int", "int64", "int32":
			return "integer", "", nil, ""
		case "float32", "float64":
			return "number", "", nil, ""
		case "bool":
			return "boolean", "", nil, ""
		}
		return x.Name, "", nil, ""
	case *ast.StructType:
		return "object", pkg, x, ""
	}
	return fmt.Sprintf("%T", e), "", nil, ""
}

// typeDoc is the comment of a field's named type.
func (s typeSource) typeDoc(pkg string, e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
			continue
		case *ast.ArrayType:
			e = x.Elt
			continue
		case *ast.MapType:
			e = x.Value
			continue
		case *ast.Ident:
			if ts, ok := s[pkg][x.Name]; ok && ts.Doc != nil {
				return withoutName(oneLine(ts.Doc.Text()), x.Name)
			}
		case *ast.SelectorExpr:
			if ts, ok := s[x.X.(*ast.Ident).Name][x.Sel.Name]; ok && ts.Doc != nil {
				return withoutName(oneLine(ts.Doc.Text()), x.Sel.Name)
			}
		}
		return ""
	}
}

func commentOf(f *ast.Field) string {
	switch {
	case f.Doc != nil:
		return oneLine(f.Doc.Text())
	case f.Comment != nil:
		return oneLine(f.Comment.Text())
	}
	return ""
}

// withoutName drops a Go name leading a comment ("ServerConfig configures
// the server" is "Configures the server").
func withoutName(doc, goName string) string {
	rest, ok := strings.CutPrefix(doc, goName+" ")
	if !ok || rest == "" {
		return doc
	}
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "is "), "are ")
	return strings.ToUpper(rest[:1]) + rest[1:]
}

// markdownCell keeps a comment's text as written in a table cell: a pipe
// would end the cell and <app> would be read as HTML.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// userWords turns a Go comment into the reference's words: the field's Go
// name at the start goes ("AppID is the App's ID." is "The App's ID."), and
// the Go names of the struct's other fields become their keys.
func userWords(doc, goName, key string, st *ast.StructType) string {
	for _, lead := range []string{goName + " is ", goName + " are ", goName + ": "} {
		if rest, ok := strings.CutPrefix(doc, lead); ok {
			doc = strings.ToUpper(rest[:1]) + rest[1:]
			break
		}
	}
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		name, _, _ := strings.Cut(reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("yaml"), ",")
		if name == "" || name == "-" || f.Names[0].Name == "GitHub" { // the word, more often than the key
			continue
		}
		doc = regexp.MustCompile(`\b`+regexp.QuoteMeta(f.Names[0].Name)+`\b`).ReplaceAllString(doc, "`"+name+"`")
	}
	return doc
}
