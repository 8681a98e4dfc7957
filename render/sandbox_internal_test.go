package render

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftback/driftback/render/child"
	"github.com/driftback/driftback/render/childbin"
	"github.com/driftback/driftback/render/slots"
)

// memTree is a tree held in memory, for tests that bypass the repository.
func memTree(files map[string]string) *Tree {
	t := newTree("memory")
	for p, c := range files {
		t.files[p] = treeFile{path: p, size: int64(len(c)), hash: blobHash([]byte(c))}
	}
	t.index()
	t.open = func(f treeFile) ([]byte, error) { return []byte(files[f.path]), nil }
	return t
}

// TestChildRefusesNetworkAndPrograms proves the child is safe on its own, even
// if a hostile reference got past the checks of the kustomization files: an
// http resource is refused by its transport and a git base finds no program;
// driftback's own child and driftback-render alike.
func TestChildRefusesNetworkAndPrograms(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n")
	}))
	defer srv.Close()

	cases := map[string]struct {
		resource string
		says     string
	}{
		"http resource":    {srv.URL + "/cm.yaml", "network access is disabled"},
		"git base":         {srv.URL + "/org/repo.git//base?ref=main", "network access is disabled"},
		"github git base":  {"github.com/example/repo//deploy?ref=v1", "no 'git' program"},
		"file:// git base": {"file:///etc", "no 'git' program"},
	}
	for name, tc := range cases {
		for which, exe := range map[string]string{"driftback": "", "driftback-render": KustomizeChild(t)} {
			t.Run(name+" in "+which, func(t *testing.T) {
				hits.Store(0)
				tree := memTree(map[string]string{"app/kustomization.yaml": "resources:\n- " + tc.resource + "\n"})
				// The closure is built by hand: the checks that would reject the
				// reference are exactly what this test leaves out.
				o := &Overlay{Path: "app"}
				j := &job{overlay: o, closure: &closure{overlay: "app", files: []string{"app/kustomization.yaml"}}}
				r := New(Options{Parallelism: 1, KustomizeExecutable: exe})
				if err := r.run(context.Background(), tree, []*job{j}); err != nil {
					t.Fatal(err)
				}
				if len(o.Problems) == 0 {
					t.Fatalf("rendered a remote resource:\n%s", o.YAML)
				}
				if p := o.Problems[0]; !strings.Contains(p.Message, tc.says) || p.Reason != ReasonRemote {
					t.Errorf("problem %+v, want a remote refused, saying %q", p, tc.says)
				}
				if n := hits.Load(); n != 0 {
					t.Errorf("the child made %d requests", n)
				}
			})
		}
	}
}

// TestAChildBesideThatWillNotStartLeavesTheRenderToDriftback: when the
// driftback-render found beside driftback will not start (removed since,
// or built for another machine), driftback's own child renders instead.
func TestAChildBesideThatWillNotStartLeavesTheRenderToDriftback(t *testing.T) {
	gone := filepath.Join(t.TempDir(), childbin.Name)
	find := childbin.Find
	childbin.Find = func() string { return gone }
	t.Cleanup(func() { childbin.Find = find })
	o := &Overlay{Path: "app"}
	tree := memTree(map[string]string{
		"app/kustomization.yaml": "resources:\n- cm.yaml\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n",
	})
	j := &job{overlay: o, closure: &closure{overlay: "app", files: []string{"app/kustomization.yaml", "app/cm.yaml"}}}
	if err := New(Options{Parallelism: 1}).run(context.Background(), tree, []*job{j}); err != nil {
		t.Fatal(err)
	}
	if len(o.Problems) != 0 || !strings.Contains(string(o.YAML), "name: kept") {
		t.Errorf("problems %v, rendered:\n%s", o.Problems, o.YAML)
	}
}

// TestTheKustomizeChildRefusesWhatNeedsHelm: driftback-render, sent what
// only a child with Helm answers (a chart, an overlay inflating
// helmCharts), refuses it and renders nothing; the parent never sends it
// such a request (TestTheKustomizeChildRendersAsDriftbackDoes).
func TestTheKustomizeChildRefusesWhatNeedsHelm(t *testing.T) {
	for name, req := range map[string]child.Request{
		"a chart":              {Helm: []byte{1}},
		"an overlay inflating": {Files: map[string][]byte{"app/kustomization.yaml": []byte("helmCharts: [{name: x}]\n")}, Overlays: []string{"app"}, Build: map[string]BuildOptions{"app": {EnableHelm: true}}},
	} {
		cmd := exec.Command(KustomizeChild(t))
		cmd.Env = []string{child.Env + "=1"}
		var in, out, stderr bytes.Buffer
		if err := gob.NewEncoder(&in).Encode(req); err != nil {
			t.Fatal(err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &stderr
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || out.Len() != 0 || !strings.Contains(stderr.String(), "links no Helm") {
			t.Errorf("%s: %v, %d bytes out\n%s", name, err, out.Len(), stderr.String())
		}
	}
}

// TestChildTimeLimit proves a render that overruns its wall time is killed and
// blamed on its overlay, and the renderer goes on with the next one.
func TestChildTimeLimit(t *testing.T) {
	tree := memTree(map[string]string{
		"a/kustomization.yaml": "resources: []\n",
		"b/kustomization.yaml": "resources: []\n",
	})
	var jobs []*job
	for _, p := range []string{"a", "b"} {
		jobs = append(jobs, &job{overlay: &Overlay{Path: p}, closure: &closure{overlay: p, files: []string{p + "/kustomization.yaml"}}})
	}
	// No child starts, reads its input and renders within a microsecond.
	r := New(Options{Parallelism: 1, Limits: Limits{Timeout: time.Microsecond}})
	if err := r.run(context.Background(), tree, jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if len(j.overlay.Problems) != 1 {
			t.Fatalf("%s: problems %v, want one", j.overlay.Path, j.overlay.Problems)
		}
		p := j.overlay.Problems[0]
		if p.Reason != ReasonLimit || !strings.Contains(p.Message, "took longer than the limit") || p.File != j.overlay.Path+"/kustomization.yaml" {
			t.Errorf("%s: problem %+v, want a time limit on its kustomization", j.overlay.Path, p)
		}
	}
}

// TestACrashCauseIsKeptWhereverItIs: a child that writes more than the
// buffer keeps before it dies still names why it died: the cause line is
// kept wherever it falls, and the crash is classified by it.
func TestACrashCauseIsKeptWhereverItIs(t *testing.T) {
	b := slots.NewStderr(64)
	for i := 0; i < 100; i++ {
		_, _ = b.Write([]byte("runtime: a warning line of no consequence\n"))
	}
	_, _ = b.Write([]byte("fatal error: runtime: out of mem"))
	_, _ = b.Write([]byte("ory\ngoroutine 1 [running]:\n"))
	for i := 0; i < 100; i++ {
		_, _ = b.Write([]byte("\tmain.f()\n"))
	}
	p := exitProblem(nil, b.String(), Limits{Memory: 2 << 30})
	if p.Reason != ReasonLimit || !strings.Contains(p.Message, "more than the memory limit") {
		t.Errorf("classified as %s: %s", p.Reason, p.Message)
	}
}

// TestTheRaceDetectorsMemoryFailureIsTheMemoryLimit: under the race
// detector a child past its memory limit may die in the detector's own
// allocator, saying so in its words: that is the memory limit too.
func TestTheRaceDetectorsMemoryFailureIsTheMemoryLimit(t *testing.T) {
	for _, stderr := range []string{
		"FATAL: ThreadSanitizer CHECK failed: sanitizer_allocator_primary64.h:131 \"((kSpaceBeg)) == ((address_range.Init(TotalSpaceSize, PrimaryAllocatorName, kSpaceBeg)))\"",
		"==4242==ERROR: ThreadSanitizer failed to allocate 0x400000 (4194304) bytes of clock allocator (error code: 12)",
	} {
		if p := exitProblem(nil, stderr, Limits{Memory: 2 << 30}); p.Reason != ReasonLimit || !strings.Contains(p.Message, "more than the memory limit") {
			t.Errorf("%q classified as %s: %s", stderr, p.Reason, p.Message)
		}
	}
}
