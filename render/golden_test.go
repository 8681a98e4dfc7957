package render_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/render"
)

var update = flag.Bool("update", false, "regenerate golden files with `kubectl kustomize` from PATH")

const fixtureRepo = "../fixtures/render"

// TestGolden proves that driftback renders every fixture overlay exactly as
// `kubectl kustomize` does: same objects, same content, same order, byte for
// byte, from the working tree and from a commit, tag and branch of a real
// repository. The golden files are kubectl's own output (see -update).
func TestGolden(t *testing.T) {
	wt, err := render.DirTree(fixtureRepo)
	if err != nil {
		t.Fatal(err)
	}
	overlays := render.Discover(wt)
	if diff := cmp.Diff([]string{"overlays/dev", "overlays/prod", "overlays/staging"}, overlays); diff != "" {
		t.Fatalf("discovered overlays (-want +got):\n%s", diff)
	}
	if *update {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Fatal("-update needs kubectl on PATH: the golden files are kubectl kustomize's output")
		}
		for _, o := range overlays {
			out, err := exec.Command(kubectl, "kustomize", filepath.Join(fixtureRepo, o)).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v", o, err)
			}
			if err := os.WriteFile(filepath.Join("testdata/golden", goldenName(o)), out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	repo := newGitRepo(t)
	sha := repo.commit("fixtures", copyDir(t, fixtureRepo))
	repo.tag("v1", sha)
	trees := map[string]*render.Tree{"working tree": wt}
	for _, rev := range []string{sha, sha[:10], "v1", "master", "HEAD"} {
		tr, err := render.GitTree(repo.repo, rev)
		if err != nil {
			t.Fatalf("GitTree(%s): %v", rev, err)
		}
		if tr.Rev != sha {
			t.Errorf("GitTree(%s).Rev = %s, want %s", rev, tr.Rev, sha)
		}
		trees["ref "+rev] = tr
	}

	// No cache: every tree renders for real, with and without origins:
	// recording provenance must not change a byte of the output.
	for name, tr := range trees {
		for _, origins := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/origins=%v", name, origins), func(t *testing.T) {
				res, err := render.New(render.Options{Origins: origins}).Render(context.Background(), tr, overlays)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range res.Overlays {
					if err := o.Err(); err != nil {
						t.Errorf("%s: %v", o.Path, err)
						continue
					}
					want, err := os.ReadFile(filepath.Join("testdata/golden", goldenName(o.Path)))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(string(want), string(o.YAML)); diff != "" {
						t.Errorf("%s differs from kubectl kustomize (-want +got):\n%s", o.Path, diff)
					}
					if got := len(o.Origins) > 0; got != origins {
						t.Errorf("%s: origins recorded = %v, want %v", o.Path, got, origins)
					}
				}
			})
		}
	}
}

func TestRenderedOutputKeepsNoOriginAnnotations(t *testing.T) {
	tr, err := render.DirTree(fixtureRepo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.Options{Origins: true}).Render(context.Background(), tr, []string{"overlays/prod"})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Overlays[0]
	objs, err := o.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if _, ok := obj.GetAnnotations()["config.kubernetes.io/origin"]; ok {
			t.Errorf("%s/%s keeps the origin annotation used for provenance", obj.GetKind(), obj.GetName())
		}
	}
}
