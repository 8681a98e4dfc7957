package prepare_test

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

func cm(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// TestArgoCDDirectoryRendersAsArgoCDReadsIt: a Directory source reads the
// YAML and JSON files of its folder (and below it with recurse), through its
// include and exclude patterns (where * crosses "/" and {a,b} is either),
// skips files marked +argocd:skip-file-rendering, and refuses jsonnet.
func TestArgoCDDirectoryRendersAsArgoCDReadsIt(t *testing.T) {
	dir := t.TempDir()
	testfs.Write(t, dir, map[string]string{
		"apps/guestbook/a.yaml":            cm("a"),
		"apps/guestbook/b.yml":             cm("b") + "---\n" + cm("b2"),
		"apps/guestbook/c.json":            `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`,
		"apps/guestbook/README.md":         "not a manifest\n",
		"apps/guestbook/skip.yaml":         "# +argocd:skip-file-rendering\n" + cm("skipped"),
		"apps/guestbook/sub/d.yaml":        cm("d"),
		"apps/guestbook/sub/deep/e.yaml":   cm("e"),
		"apps/guestbook/test/fixture.yaml": cm("fixture"),
		"apps/jsonnet/app.jsonnet":         "{}",
		"apps/jsonnet/lib.libsonnet":       "{}",
		"apps/chart/Chart.yaml":            "name: x\n",
		"apps/chart/values.yaml":           "a: 1\n",
		"apps/both/Chart.yaml":             "name: x\n",
		"apps/both/kustomization.yaml":     "resources: [a.yaml]\n",
		"apps/both/a.yaml":                 cm("a"),
	})
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]string{"apps/guestbook": "Directory", "apps/jsonnet": "Directory", "apps/chart": "Helm", "apps/both": "Kustomize"} {
		if got := prepare.ArgoCDSourceType(tree, d); got != want {
			t.Errorf("%s: %s, want %s", d, got, want)
		}
	}
	names := func(o prepare.ArgoCDDirectory) []string {
		t.Helper()
		at, err := prepare.ArgoCDDirectoryTree(tree, "apps/guestbook", o)
		if err != nil {
			t.Fatal(err)
		}
		res, err := render.New(render.DefaultOptions()).Render(context.Background(), at, []string{"apps/guestbook"})
		if err != nil {
			t.Fatal(err)
		}
		objs, err := res.Overlays[0].Objects()
		if err != nil || res.Overlays[0].Err() != nil {
			t.Fatal(err, res.Overlays[0].Err())
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct {
		name string
		opts prepare.ArgoCDDirectory
		want []string
	}{
		{"the folder alone", prepare.ArgoCDDirectory{}, []string{"a", "b", "b2", "c"}},
		{"recurse", prepare.ArgoCDDirectory{Recurse: true}, []string{"a", "b", "b2", "c", "d", "e", "fixture"}},
		{"exclude a folder, * crossing slashes", prepare.ArgoCDDirectory{Recurse: true, Exclude: "test/*"}, []string{"a", "b", "b2", "c", "d", "e"}},
		{"include alternatives", prepare.ArgoCDDirectory{Recurse: true, Include: "{a.yaml,sub/*}"}, []string{"a", "d", "e"}},
		{"include, then exclude", prepare.ArgoCDDirectory{Recurse: true, Include: "*.yaml", Exclude: "*deep*"}, []string{"a", "d", "fixture"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, names(c.opts)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
	_, err = prepare.ArgoCDDirectoryTree(tree, "apps/jsonnet", prepare.ArgoCDDirectory{})
	var js *prepare.JsonnetError
	if !errors.As(err, &js) || len(js.Files) != 1 || js.Files[0] != "apps/jsonnet/app.jsonnet" {
		t.Errorf("a jsonnet folder: %v", err)
	}
}

// TestArgoCDHooksAreLeftOut: Argo CD runs hooks at sync and never applies
// objects marked Skip, so neither is part of what a Directory source renders;
// a hook with a generateName (which kustomize refuses) renders too. A Helm
// crd-install hook is an ordinary object to Argo CD.
func TestArgoCDHooksAreLeftOut(t *testing.T) {
	dir := t.TempDir()
	hook := func(name, annotations string) string {
		return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  " + name + "\n  annotations: {" + annotations + "}\nspec:\n  template:\n    spec: {restartPolicy: Never, containers: [{name: x, image: x}]}\n"
	}
	testfs.Write(t, dir, map[string]string{
		"hooks/app.yaml": cm("app") + "---\n" + hook("generateName: upgrade-sql-", "argocd.argoproj.io/hook: PreSync") +
			"---\n" + hook("name: skipped", "argocd.argoproj.io/hook: Skip"),
		"hooks/helm.yaml":  hook("name: helm-test", "helm.sh/hook: test") + "---\n" + cm("crd") + "  annotations: {helm.sh/hook: crd-install}\n",
		"hooks/only.json":  `{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "post", "annotations": {"argocd.argoproj.io/hook": "PostSync"}}, "spec": {}}`,
		"hooks/plain.yaml": hook("name: migrate", "team: db"),
	})
	tree, err := render.DirTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	at, err := prepare.ArgoCDDirectoryTree(tree, "hooks", prepare.ArgoCDDirectory{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).RenderWith(context.Background(), at, []string{"hooks"}, render.BuildOptions{WithoutArgoCDHooks: true})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Overlays[0]
	objs, err := o.Objects()
	if err != nil || o.Err() != nil {
		t.Fatal(err, o.Err())
	}
	var names []string
	for _, obj := range objs {
		names = append(names, obj.GetKind()+" "+obj.GetName())
	}
	sort.Strings(names)
	sort.Strings(o.Hooks)
	if diff := cmp.Diff([]string{"ConfigMap app", "ConfigMap crd", "Job migrate"}, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Job helm-test", "Job post", "Job skipped", "Job upgrade-sql-*"}, o.Hooks); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
	// Without the option, kustomize refuses the nameless hook, as before.
	res, err = render.New(render.DefaultOptions()).Render(context.Background(), at, []string{"hooks"})
	if err != nil || res.Overlays[0].Err() == nil {
		t.Errorf("a nameless object rendered without the option: %v", err)
	}
}
