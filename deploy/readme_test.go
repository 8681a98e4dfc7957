package deploy_test

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestReadmeRBAC proves deploy/README.md's RBAC table says what the
// manifests grant: every Role and ClusterRole of the base and the dry-run
// component has a row, and each row names exactly the verbs and resources
// its role's rules hold. A rule changed in rbac.yaml fails here until the
// table says so.
func TestReadmeRBAC(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	type grant struct{ verbs, resources []string }
	documented := map[string]grant{}
	row := regexp.MustCompile("^\\| (ClusterRole|Role) `([^`]+)`[^|]*\\| ([^|]*) \\|")
	tick := regexp.MustCompile("`([^`]+)`")
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
	for _, line := range strings.Split(string(readme), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var g grant
		for _, w := range tick.FindAllStringSubmatch(m[3], -1) {
			switch {
			case slices.Contains(verbs, w[1]):
				g.verbs = append(g.verbs, w[1])
			case !strings.Contains(w[1], "."): // an API group has a dot
				g.resources = append(g.resources, w[1])
			}
		}
		if strings.Contains(m[3], "every resource") {
			g.resources = append(g.resources, "*")
		}
		documented[m[1]+" "+m[2]] = g
	}
	granted := map[string]grant{}
	for _, o := range renderOverlay(t, "test/dry-run") {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole // a Role's fields are a subset
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		var g grant
		for _, rule := range r.Rules {
			g.verbs = append(g.verbs, rule.Verbs...)
			g.resources = append(g.resources, rule.Resources...)
		}
		granted[o.GetKind()+" "+o.GetName()] = g
	}
	sorted := func(s []string) []string { s = slices.Clone(s); sort.Strings(s); return slices.Compact(s) }
	for role, g := range granted {
		d, ok := documented[role]
		if !ok {
			t.Errorf("%s is granted by the manifests but has no row in deploy/README.md's RBAC table", role)
			continue
		}
		if !slices.Equal(sorted(d.verbs), sorted(g.verbs)) || !slices.Equal(sorted(d.resources), sorted(g.resources)) {
			t.Errorf("%s: the README says verbs %v on %v; the manifests grant %v on %v", role, sorted(d.verbs), sorted(d.resources), sorted(g.verbs), sorted(g.resources))
		}
	}
	for role := range documented {
		if _, ok := granted[role]; !ok {
			t.Errorf("deploy/README.md documents %s, which the manifests do not have", role)
		}
	}
}
