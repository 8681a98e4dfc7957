package render_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/render/slots"
)

// asDeployedEnv marks the re-executed test binary that renders as the pod
// deploy/ ships would.
const asDeployedEnv = "DRIFTBACK_TEST_AS_DEPLOYED"

// TestChildMemoryAsDeployed renders a YAML alias bomb in a process that has
// the shipped pod's limits (deploy/base's limits.memory through
// DRIFTBACK_MEMORY_LIMIT, its CPU limit as GOMAXPROCS): the render child is
// stopped at its share of the pod's memory, not at the 2 GiB a child gets
// without a container limit, so the bomb fails its own render and never
// takes the pod to its OOM kill.
func TestChildMemoryAsDeployed(t *testing.T) {
	if want := os.Getenv(asDeployedEnv); want != "" {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]any{"app/kustomization.yaml": "resources:\n- bomb.yaml\n", "app/bomb.yaml": aliasBomb})
		tree, err := render.DirTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, []string{"app"})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Overlays[0].Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the bomb's render: %v; want it stopped with %q", err, want)
		}
		return
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name      string
						Env       []struct{ Name string }
						Resources struct{ Limits map[string]string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	wired := false
	for _, e := range c.Env {
		wired = wired || e.Name == slots.MemoryLimitEnv
	}
	if !wired {
		t.Errorf("deploy/base does not give the container %s", slots.MemoryLimitEnv)
	}
	mem, cpu := resource.MustParse(c.Resources.Limits["memory"]), resource.MustParse(c.Resources.Limits["cpu"])
	cores := max(1, int((cpu.MilliValue()+999)/1000))
	_, child := slots.Fit(mem.Value(), render.DefaultLimits().Memory, cores)
	if child >= render.DefaultLimits().Memory {
		t.Fatalf("the shipped pod's limits (%s, %s) leave a child the default %d MiB: the test would prove nothing", mem.String(), cpu.String(), child>>20)
	}
	want := fmt.Sprintf("more than the memory limit of %d MiB", child>>20)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildMemoryAsDeployed$", "-test.v")
	cmd.Env = append(os.Environ(), asDeployedEnv+"="+want, slots.MemoryLimitEnv+"="+strconv.FormatInt(mem.Value(), 10), "GOMAXPROCS="+strconv.Itoa(cores))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rendering as deployed (%s, %d CPU): %v\n%s", mem.String(), cores, err, out)
	}
	t.Logf("as deployed, %s and %d CPU: a child gets %d MiB", mem.String(), cores, child>>20)
}
