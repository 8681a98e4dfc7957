package render_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/driftback/driftback/render"
)

const canary = "CANARY-outside-the-repository-7f3a"

// listener counts every request it receives: a hostile kustomization must make none.
func listener(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\ndata:\n  secret: %s\n", canary)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

const goodOverlay = `resources:
- cm.yaml
`

const goodConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: good
data:
  a: b
`

// aliasBomb is a few hundred bytes of YAML that expand to gigabytes.
const aliasBomb = `apiVersion: v1
kind: ConfigMap
metadata:
  name: bomb
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func bigConfigMap(size int) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: " + strings.Repeat("x", size) + "\n"
}

// TestHostileInput proves each kind of hostile kustomization gets a clear
// problem naming the file and the reason, reads nothing outside the repository,
// makes no network request, and leaves the renderer working: a good overlay in
// the same render still renders.
func TestHostileInput(t *testing.T) {
	srv, hits := listener(t)
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	writeFiles(t, outside, map[string]any{
		"kustomization.yaml": "resources:\n- cm.yaml\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\ndata:\n  secret: " + canary + "\n",
	})
	outsideCM := filepath.Join(outside, "cm.yaml")

	cases := []struct {
		name   string
		files  map[string]any
		reason render.Reason
		file   string // file the problem must name
		line   int    // 0: any
		says   string // the message must contain this
		limits render.Limits
	}{
		{
			name:   "a resources entry whose ../ leaves the repository",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- ../../outside\n"},
			reason: render.ReasonOutsideRepo, file: "app/kustomization.yaml", line: 2, says: "leaves the repository",
		},
		{
			name:   "a file resource whose ../ leaves the repository",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- ok.yaml\n- ../../outside/cm.yaml\n", "app/ok.yaml": goodConfigMap},
			reason: render.ReasonOutsideRepo, file: "app/kustomization.yaml", line: 3, says: "leaves the repository",
		},
		{
			name:   "an absolute resource path",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- " + outsideCM + "\n"},
			reason: render.ReasonOutsideRepo, file: "app/kustomization.yaml", line: 2, says: "absolute paths are not allowed",
		},
		{
			name:   "a patch file outside the repository",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- ok.yaml\npatches:\n- path: ../../outside/cm.yaml\n", "app/ok.yaml": goodConfigMap},
			reason: render.ReasonOutsideRepo, file: "app/kustomization.yaml", line: 4, says: "patches.path",
		},
		{
			name: "a symlinked file that points outside the repository",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- link.yaml\n",
				"app/link.yaml":          symlink(outsideCM),
			},
			reason: render.ReasonSymlink, file: "app/kustomization.yaml", line: 2, says: "symlinks are not followed",
		},
		{
			name: "a symlinked directory that points outside the repository",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- linked\n",
				"app/linked":             symlink("../../outside"),
			},
			reason: render.ReasonSymlink, file: "app/kustomization.yaml", line: 2, says: "app/linked is a symlink",
		},
		{
			name:   "an http resource",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- " + srv.URL + "/cm.yaml\n"},
			reason: render.ReasonRemote, file: "app/kustomization.yaml", line: 2, says: "remote resources are not rendered",
		},
		{
			name:   "a git remote base over https",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- " + srv.URL + "/org/repo.git//base?ref=main\n"},
			reason: render.ReasonRemote, file: "app/kustomization.yaml", line: 2, says: "remote resources",
		},
		{
			name:   "a git remote base on github",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- github.com/example/repo//deploy?ref=v1.0.0\n"},
			reason: render.ReasonRemote, file: "app/kustomization.yaml", line: 2, says: "remote resources",
		},
		{
			name:   "a file:// git base",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- file://" + outside + "\n"},
			reason: render.ReasonRemote, file: "app/kustomization.yaml", line: 2, says: "remote resources",
		},
		{
			name:   "helmCharts",
			files:  map[string]any{"app/kustomization.yaml": "helmCharts:\n- name: redis\n  repo: " + srv.URL + "\n  version: 1.0.0\n"},
			reason: render.ReasonHelm, file: "app/kustomization.yaml", line: 1, says: "Helm charts are not rendered",
		},
		{
			name: "an exec plugin",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- ok.yaml\ntransformers:\n- exec.yaml\n",
				"app/ok.yaml":            goodConfigMap,
				"app/exec.yaml": `apiVersion: example.com/v1
kind: Shell
metadata:
  name: pwn
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: /bin/sh
`,
			},
			reason: render.ReasonPlugin, file: "app/exec.yaml", says: "plugin",
		},
		{
			name: "a KRM function plugin",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- ok.yaml\ngenerators:\n- fn.yaml\n",
				"app/ok.yaml":            goodConfigMap,
				"app/fn.yaml": `apiVersion: example.com/v1
kind: Generator
metadata:
  name: fn
  annotations:
    config.kubernetes.io/function: |
      container:
        image: example.com/evil:latest
`,
			},
			reason: render.ReasonPlugin, file: "app/fn.yaml", says: "plugin",
		},
		{
			name: "a Go plugin",
			files: map[string]any{
				"app/kustomization.yaml": "generators:\n- gen.yaml\n",
				"app/gen.yaml":           "apiVersion: someteam.example.com/v1\nkind: SecretsFromDatabase\nmetadata:\n  name: db\n",
			},
			reason: render.ReasonPlugin, file: "app/gen.yaml", says: "plugin",
		},
		{
			name: "a YAML alias bomb",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- bomb.yaml\n",
				"app/bomb.yaml":          aliasBomb,
			},
			reason: render.ReasonLimit, file: "app/kustomization.yaml", says: "more than the memory limit of 1024 MiB",
			limits: render.Limits{Memory: 1 << 30, CPU: 20 * time.Second, Timeout: 40 * time.Second},
		},
		{
			name: "a YAML alias bomb under the limits as shipped",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- bomb.yaml\n",
				"app/bomb.yaml":          aliasBomb,
			},
			reason: render.ReasonLimit, file: "app/kustomization.yaml",
			says: fmt.Sprintf("more than the memory limit of %d MiB", render.DefaultLimits().Memory>>20),
		},
		{
			name: "a YAML alias bomb against a lower CPU-time limit",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- bomb.yaml\n",
				"app/bomb.yaml":          aliasBomb,
			},
			reason: render.ReasonLimit, file: "app/kustomization.yaml", says: "more than the CPU limit of 1s",
			limits: render.Limits{Memory: 6 << 30, CPU: time.Second, Timeout: 60 * time.Second},
		},
		{
			name: "a YAML alias bomb against a lower wall-time limit",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- bomb.yaml\n",
				"app/bomb.yaml":          aliasBomb,
			},
			// The limit leaves the good overlay beside it room to start a
			// render child on a loaded machine.
			reason: render.ReasonLimit, file: "app/kustomization.yaml", says: "took longer than the limit of 2s",
			limits: render.Limits{Memory: 6 << 30, CPU: 60 * time.Second, Timeout: 2 * time.Second},
		},
		{
			name:   "a file over the size limit for one file",
			files:  map[string]any{"app/kustomization.yaml": "resources:\n- big.yaml\n", "app/big.yaml": bigConfigMap(4096)},
			reason: render.ReasonLimit, file: "app/big.yaml", says: "over the limit of 2048 per file",
			limits: render.Limits{MaxFile: 2048},
		},
		{
			name: "files over the size limit for one overlay",
			files: map[string]any{"app/kustomization.yaml": "resources:\n- a.yaml\n- b.yaml\n",
				"app/a.yaml": bigConfigMap(3000), "app/b.yaml": strings.Replace(bigConfigMap(3000), "name: big", "name: big2", 1)},
			reason: render.ReasonLimit, says: "of files, over the limit of 5000",
			limits: render.Limits{MaxInput: 5000},
		},
		{
			name: "output over the size limit",
			files: map[string]any{"app/kustomization.yaml": "resources:\n- cm.yaml\nreplicas: []\nnamePrefix: p-\ncommonLabels: {a: b}\n",
				"app/cm.yaml": bigConfigMap(3000)},
			reason: render.ReasonLimit, file: "app/kustomization.yaml", says: "the rendered output is",
			limits: render.Limits{MaxOutput: 1000},
		},
		{
			name: "input that makes kustomize panic",
			files: map[string]any{
				"app/kustomization.yaml": "resources:\n- rb.yaml\n",
				"app/rb.yaml":            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: rb\nsubjects: [x]\n",
			},
			reason: render.ReasonPanic, file: "app/kustomization.yaml", says: "kustomize crashed",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := newGitRepo(t)
			files := map[string]any{"good/kustomization.yaml": goodOverlay, "good/cm.yaml": goodConfigMap}
			for k, v := range tc.files {
				files[k] = v
			}
			sha := repo.commit("hostile", files)
			committed, err := render.GitTree(repo.repo, sha)
			if err != nil {
				t.Fatal(err)
			}
			working, err := render.DirTree(repo.dir)
			if err != nil {
				t.Fatal(err)
			}
			// driftback's own child and driftback-render hold alike.
			for child, exe := range map[string]string{"driftback": "", "driftback-render": render.KustomizeChild(t)} {
				r := render.New(render.Options{Limits: tc.limits, Parallelism: 1, KustomizeExecutable: exe})
				for name, tr := range map[string]*render.Tree{child + ", commit": committed, child + ", working tree": working} {
					before := hits.Load()
					res, err := r.Render(context.Background(), tr, []string{"app", "good"})
					if err != nil {
						t.Fatalf("%s: Render: %v", name, err)
					}
					bad, good := res.Overlays[0], res.Overlays[1]
					if len(bad.Problems) == 0 {
						t.Fatalf("%s: rendered without a problem:\n%s", name, bad.YAML)
					}
					p := bad.Problems[0]
					if p.Reason != tc.reason || p.File != tc.file || (tc.line != 0 && p.Line != tc.line) || !strings.Contains(p.Message, tc.says) {
						t.Errorf("%s: problem = %+v\nwant reason %s, file %s, line %d, message containing %q", name, p, tc.reason, tc.file, tc.line, tc.says)
					}
					if p.Overlay != "app" {
						t.Errorf("%s: problem names overlay %q, want app", name, p.Overlay)
					}
					for _, o := range res.Overlays {
						if strings.Contains(string(o.YAML), canary) || strings.Contains(fmt.Sprint(o.Problems), canary) {
							t.Errorf("%s: %s shows content from outside the repository", name, o.Path)
						}
					}
					if n := hits.Load() - before; n != 0 {
						t.Errorf("%s: the render made %d network requests", name, n)
					}
					if err := good.Err(); err != nil || !strings.Contains(string(good.YAML), "name: good") {
						t.Errorf("%s: the good overlay beside it did not render: %v", name, err)
					}
				}
			}
		})
	}
}

// TestSubmodulesAreLeftOut proves a git submodule in the repository is never
// rendered (its commit lives in another repository that is never fetched):
// an overlay that uses one gets a problem naming it, and the rest renders.
func TestSubmodulesAreLeftOut(t *testing.T) {
	repo := newGitRepo(t)
	sha := repo.commit("app", map[string]any{
		"app/kustomization.yaml":  "resources:\n- ../vendor/base\n",
		"good/kustomization.yaml": goodOverlay, "good/cm.yaml": goodConfigMap,
	})
	// Add vendor/base as a gitlink, as `git submodule add` records it.
	commit, err := repo.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	root, err := commit.Tree()
	if err != nil {
		t.Fatal(err)
	}
	store := repo.repo.Storer
	writeTree := func(entries []object.TreeEntry) plumbing.Hash {
		t.Helper()
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		obj := store.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := store.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	vendor := writeTree([]object.TreeEntry{{Name: "base", Mode: filemode.Submodule, Hash: plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")}})
	top := writeTree(append(append([]object.TreeEntry{}, root.Entries...), object.TreeEntry{Name: "vendor", Mode: filemode.Dir, Hash: vendor}))
	next := &object.Commit{Author: commit.Author, Committer: commit.Committer, Message: "submodule", TreeHash: top, ParentHashes: []plumbing.Hash{commit.Hash}}
	obj := store.NewEncodedObject()
	if err := next.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := store.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := render.GitTree(repo.repo, h.String())
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.Options{Parallelism: 1}).Render(context.Background(), tree, []string{"app", "good"})
	if err != nil {
		t.Fatal(err)
	}
	bad, good := res.Overlays[0], res.Overlays[1]
	if len(bad.Problems) == 0 || !strings.Contains(bad.Problems[0].Message, "submodule") || !strings.Contains(bad.Problems[0].Message, "vendor/base") ||
		bad.Problems[0].Reason != render.ReasonSymlink || bad.Problems[0].File != "app/kustomization.yaml" {
		t.Fatalf("an overlay using a submodule: problems %+v, want one of reason %q in app/kustomization.yaml naming vendor/base as a submodule",
			bad.Problems, render.ReasonSymlink)
	}
	if err := good.Err(); err != nil {
		t.Errorf("the overlay beside it: %v", err)
	}
}
