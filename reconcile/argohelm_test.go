package reconcile

import (
	"runtime"
	"strings"
	"testing"

	"github.com/driftback/driftback/discover"
)

// TestParametersAreBoundedBeforeHelmParsesThem: an Application's
// parameter whose name is a few hundred bytes of list indexes
// (a[65535][65535]…) would make Helm's parser allocate tens of megabytes;
// it is refused, unparsed, saying why, as are parameters that together
// make too many list items. Ordinary indexes are set as helm --set sets
// them.
func TestParametersAreBoundedBeforeHelmParsesThem(t *testing.T) {
	bomb := "a" + strings.Repeat("[65535]", 29)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, why := argoValues(nil, &discover.ArgoHelm{Parameters: []discover.ArgoHelmParameter{{Name: bomb, Value: "x"}}})
	runtime.ReadMemStats(&after)
	if !strings.Contains(why, "list index 65535") {
		t.Errorf("a name of list indexes: %q, want it refused", why)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", alloc)
	}
	many := make([]discover.ArgoHelmParameter, 100)
	for i := range many {
		many[i] = discover.ArgoHelmParameter{Name: "list" + strings.Repeat("[1000]", 1), Value: "x"}
	}
	if _, why := argoValues(nil, &discover.ArgoHelm{Parameters: many}); !strings.Contains(why, "more than 65536 list items") {
		t.Errorf("parameters making 100,100 list items: %q, want them refused", why)
	}
	values, why := argoValues(nil, &discover.ArgoHelm{Parameters: []discover.ArgoHelmParameter{{Name: "env[1].name", Value: "MODE"}}})
	if why != "" {
		t.Fatal(why)
	}
	env, _ := values["env"].([]any)
	if len(env) != 2 || env[1].(map[string]any)["name"] != "MODE" {
		t.Errorf("env[1].name set as %v", values)
	}
}
