package discover

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ArgoCDAppProjects are Argo CD's projects, in its own namespace.
var ArgoCDAppProjects = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}

// projectRefuses says why the AppProject an Application names would not let
// Argo CD sync it, or "" when it does: a project that does not exist, one
// that does not let Applications of the Application's namespace use it, or
// one whose sourceRepos or destinations leave out the Application's source
// or destination. Whoever may create an Application cannot have compared
// what Argo CD would refuse to apply.
func projectRefuses(app *unstructured.Unstructured, repoURL string, s Settings, argoNS string) string {
	name, _, _ := unstructured.NestedString(app.Object, "spec", "project")
	if name == "" {
		name = "default"
	}
	if s.Projects == nil {
		return fmt.Sprintf("Argo CD's AppProjects in %s could not be read, so whether project %s lets it sync is unknown", argoNS, name)
	}
	p := s.Projects[name]
	if p == nil {
		return fmt.Sprintf("its AppProject %s does not exist in %s: Argo CD does not sync it", name, argoNS)
	}
	list := func(fields ...string) []string {
		v, _, _ := unstructured.NestedStringSlice(p.Object, append([]string{"spec"}, fields...)...)
		return v
	}
	if ns := app.GetNamespace(); ns != argoNS && !permitted(list("sourceNamespaces"), ns) {
		return fmt.Sprintf("its AppProject %s does not let Applications in namespace %s use it (spec.sourceNamespaces): Argo CD does not sync it", name, ns)
	}
	if !permitted(list("sourceRepos"), normalRepo(repoURL)) {
		return fmt.Sprintf("its AppProject %s does not permit its source %s (spec.sourceRepos): Argo CD does not sync it", name, repoURL)
	}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, fields...)
		return v
	}
	server, dname, ns := str("spec", "destination", "server"), str("spec", "destination", "name"), str("spec", "destination", "namespace")
	where := server
	if dname != "" {
		where = dname
	}
	switch {
	case server == "" && dname == "in-cluster":
		server = InClusterServer
	case dname == "" && strings.TrimSuffix(server, "/") == InClusterServer:
		dname = "in-cluster"
	}
	dests, _, _ := unstructured.NestedSlice(p.Object, "spec", "destinations")
	if !destinationPermitted(dests, server, dname, ns) {
		return fmt.Sprintf("its AppProject %s does not permit its destination %s, namespace %q (spec.destinations): Argo CD does not sync it", name, where, ns)
	}
	return ""
}

// permitted says whether value matches one of patterns and none of the
// denying ones ("!pattern"), as Argo CD reads a project's lists.
func permitted(patterns []string, value string) bool {
	allowed := false
	for _, p := range patterns {
		if deny, ok := strings.CutPrefix(p, "!"); ok {
			if globMatch(normalRepo(deny), value) || globMatch(deny, value) {
				return false
			}
			continue
		}
		allowed = allowed || globMatch(p, value) || globMatch(normalRepo(p), value)
	}
	return allowed
}

// destinationPermitted applies a project's destinations as Argo CD does: a
// destination matches by server or by name, and by namespace; a denying one
// ("!" before its server, name or namespace) that matches refuses it.
func destinationPermitted(dests []any, server, name, namespace string) bool {
	allowed := false
	for _, d := range dests {
		m, _ := d.(map[string]any)
		get := func(k string) string { v, _ := m[k].(string); return v }
		dServer, dName, dNS := get("server"), get("name"), get("namespace")
		deny := false
		for _, v := range []*string{&dServer, &dName, &dNS} {
			if rest, ok := strings.CutPrefix(*v, "!"); ok {
				*v, deny = rest, true
			}
		}
		// Argo CD resolves a destination named and not addressed to its
		// cluster's server before it asks the project: the cluster it
		// runs in is in-cluster; another's server is in its cluster
		// Secret, unknown here, which only "*" is sure to match.
		serverMatched := server != "" && dServer != "" && globMatch(dServer, server)
		if server == "" && name != "" && name != "in-cluster" {
			serverMatched = dServer == "*"
		}
		matched := (serverMatched || (name != "" && dName != "" && globMatch(dName, name))) &&
			globMatch(dNS, namespace)
		if matched && deny {
			return false
		}
		allowed = allowed || (matched && !deny)
	}
	return allowed
}

// globMatch matches as Argo CD's globs do: "*" any run of characters (slashes
// too), "?" one.
func globMatch(pattern, value string) bool {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return err == nil && re.MatchString(value)
}

// normalRepo is a repository URL as Argo CD compares them: lower case,
// without a trailing ".git" or "/".
func normalRepo(url string) string {
	return strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(url), "/"), ".git")
}
