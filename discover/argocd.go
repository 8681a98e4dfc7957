package discover

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/prepare"
	"github.com/driftback/driftback/render"
)

// ArgoCDApplications is the Argo CD kind discovery reads.
var ArgoCDApplications = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// InClusterServer is the destination server Argo CD uses for the cluster it
// runs in.
const InClusterServer = "https://kubernetes.default.svc"

var hexSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// FromArgoCD derives the target of an Argo CD Application.
func FromArgoCD(app *unstructured.Unstructured, s Settings) *Found {
	f := &Found{
		Reconciler: ReconcilerArgoCD,
		Object:     objectName("Application", app.GetNamespace(), app.GetName()),
		Namespace:  app.GetNamespace(), Name: app.GetName(),
		On: s.On, Application: applicationSpec(app), EnableHelm: s.ArgoCDEnableHelm,
	}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, fields...)
		return v
	}
	argoNS := s.ArgoCDNamespace
	if argoNS == "" {
		argoNS = "argocd"
	}
	instance := app.GetName()
	if app.GetNamespace() != argoNS {
		instance = app.GetNamespace() + "_" + app.GetName()
	}
	f.Tracking = drift.Tracking{ArgoCDApp: instance, ArgoCDInstanceLabel: s.ArgoCDInstanceLabel, ArgoCDTrackingMethod: s.ArgoCDTrackingMethod}
	if app.GetNamespace() != argoNS && !honoured(s.ArgoCDAppNamespaces, app.GetNamespace()) {
		// Whoever may create an Application there would steer what is
		// compared, though Argo CD never syncs it.
		f.NotRendered = fmt.Sprintf("Argo CD does not reconcile Applications in namespace %s: only in %s and the namespaces of application.namespaces in argocd-cmd-params-cm", app.GetNamespace(), argoNS)
		return f
	}
	f.Cluster, f.Notes = destination(str("spec", "destination", "server"), str("spec", "destination", "name"), s)
	f.DestinationNamespace = str("spec", "destination", "namespace")

	if automated, ok, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy", "automated"); ok && automated != nil {
		enabled, set, _ := unstructured.NestedBool(automated, "enabled")
		if set && !enabled {
			f.Suspended = "its automated sync is disabled: merging changes nothing on this cluster until someone syncs the Application"
		}
		f.Prune, _, _ = unstructured.NestedBool(automated, "prune")
		f.SelfHeal, _, _ = unstructured.NestedBool(automated, "selfHeal")
	} else {
		f.Suspended = "the Application has no automated sync: merging changes nothing on this cluster until someone syncs it"
	}
	f.Ignore, f.Notes = ignoreDifferences(app, f.Notes)

	if srcs, ok, _ := unstructured.NestedSlice(app.Object, "spec", "sources"); ok && len(srcs) > 0 {
		f.NotRendered = fmt.Sprintf("it has %d sources (spec.sources); driftback renders single-source kustomize Applications", len(srcs))
		return f
	}
	src, _, _ := unstructured.NestedMap(app.Object, "spec", "source")
	if src == nil {
		f.NotRendered = "it has no source"
		return f
	}
	srcStr := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(src, fields...)
		return v
	}
	has := func(field string) bool { _, ok := src[field]; return ok && src[field] != nil }
	url := srcStr("repoURL")
	// The repository and path are known for a source that cannot be
	// rendered too: a pull request touching them lists it.
	if repo, ok := RepoOf(url, s.Host); ok {
		f.Repo, f.Path = repo, render.CleanPath(srcStr("path"))
	}
	if why := projectRefuses(app, url, s, argoNS); why != "" && !s.AnyProject {
		f.NotRendered = why
		return f
	}
	switch {
	case srcStr("chart") != "":
		f.NotRendered = "it installs the Helm chart " + srcStr("chart") + " from a chart repository: its objects are compared with the target that applies the Application"
		return f
	case has("plugin"):
		f.NotRendered = "it is rendered by a config management plugin"
		return f
	case strings.HasPrefix(url, "oci://"):
		f.NotRendered = "its source is an OCI artifact"
		return f
	}
	if f.Repo == "" {
		f.NotRendered = fmt.Sprintf("its repository is not on %s", s.Host)
		return f
	}
	switch rev := srcStr("targetRevision"); {
	case rev == "" || rev == "HEAD":
	case hexSHA.MatchString(rev):
		f.NotRendered = "it is pinned to commit " + rev + ": merging changes nothing it applies"
	case strings.HasPrefix(rev, "refs/tags/"):
		f.NotRendered = "it is pinned to tag " + strings.TrimPrefix(rev, "refs/tags/") + ": merging changes nothing it applies"
	default:
		f.Branch = strings.TrimPrefix(rev, "refs/heads/")
	}
	f.Kustomize = ApplicationKustomize(app)
	if h, ok := src["helm"].(map[string]any); ok {
		f.Helm = &ArgoHelm{}
		b, err := json.Marshal(h)
		if err == nil {
			err = json.Unmarshal(b, f.Helm)
		}
		if err != nil {
			f.NotRendered = "its Helm options cannot be read: " + err.Error()
		}
	}
	if d, ok := src["directory"].(map[string]any); ok {
		f.Directory = &prepare.ArgoCDDirectory{}
		f.Directory.Recurse, _ = d["recurse"].(bool)
		f.Directory.Include, _ = d["include"].(string)
		f.Directory.Exclude, _ = d["exclude"].(string)
	}
	return f
}

// honoured says whether Argo CD reconciles Applications in ns, by its
// application.namespaces patterns: globs, or regular expressions between
// slashes, as Argo CD reads them.
func honoured(patterns []string, ns string) bool {
	for _, p := range patterns {
		if len(p) > 1 && strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/") {
			if re, err := regexp.Compile(p[1 : len(p)-1]); err == nil && re.MatchString(ns) {
				return true
			}
			continue
		}
		if ok, err := path.Match(p, ns); err == nil && ok {
			return true
		}
	}
	return false
}

// destination maps an Application's destination onto app.yml's clusters.
func destination(server, name string, s Settings) (string, []string) {
	if (name == "" && strings.TrimSuffix(server, "/") == InClusterServer) || name == "in-cluster" {
		return s.On, nil
	}
	for _, k := range []string{name, server} {
		if c := s.Destinations[k]; k != "" && c != "" {
			return c, nil
		}
	}
	// A destination name equal to a key of clusters is not that cluster
	// unless app.yml maps it: whoever may create an Application on one
	// cluster would otherwise choose which other cluster it is compared with.
	dest := name
	if dest == "" {
		dest = server
	}
	return "", []string{fmt.Sprintf("it applies to %q, which discover.destinations does not map to one of app.yml's clusters: the pull request is compared in Git only", dest)}
}

// applicationSpec is an Application as its build reads it: identity,
// labels, annotations and spec, without its status and managed fields.
func applicationSpec(app *unstructured.Unstructured) *unstructured.Unstructured {
	out := app.DeepCopy()
	unstructured.RemoveNestedField(out.Object, "status")
	out.SetManagedFields(nil)
	return out
}

// ApplicationKustomize reads an Application's kustomize options
// (spec.source.kustomize); nil when it sets none.
func ApplicationKustomize(app *unstructured.Unstructured) *ArgoKustomize {
	k, ok, _ := unstructured.NestedMap(app.Object, "spec", "source", "kustomize")
	if !ok || k == nil {
		return nil
	}
	out := &ArgoKustomize{}
	str := func(f string) string { v, _ := k[f].(string); return v }
	boolean := func(f string) bool { v, _ := k[f].(bool); return v }
	out.NamePrefix, out.NameSuffix, out.Namespace = str("namePrefix"), str("nameSuffix"), str("namespace")
	out.ForceCommonLabels, out.ForceCommonAnnotations = boolean("forceCommonLabels"), boolean("forceCommonAnnotations")
	if imgs, ok := k["images"].([]any); ok {
		for _, i := range imgs {
			if s, ok := i.(string); ok {
				out.Images = append(out.Images, s)
			}
		}
	}
	strMap := func(f string) map[string]string {
		m, ok := k[f].(map[string]any)
		if !ok {
			return nil
		}
		out := map[string]string{}
		for key, v := range m {
			out[key] = fmt.Sprint(v)
		}
		return out
	}
	out.CommonLabels, out.CommonAnnotations = strMap("commonLabels"), strMap("commonAnnotations")
	if rs, ok := k["replicas"].([]any); ok {
		for _, r := range rs {
			m, ok := r.(map[string]any)
			if !ok {
				continue
			}
			name, _ := m["name"].(string)
			var count int64
			switch c := m["count"].(type) {
			case int64:
				count = c
			case float64:
				count = int64(c)
			case string:
				count, _ = strconv.ParseInt(c, 10, 64)
			}
			out.Replicas = append(out.Replicas, ArgoReplicas{Name: name, Count: count})
		}
	}
	if ps, ok := k["patches"].([]any); ok {
		for _, p := range ps {
			if m, ok := p.(map[string]any); ok {
				out.Patches = append(out.Patches, m)
			}
		}
	}
	if cs, ok := k["components"].([]any); ok {
		for _, c := range cs {
			if s, ok := c.(string); ok {
				out.Components = append(out.Components, s)
			}
		}
	}
	return out
}

// ignoreDifferences turns spec.ignoreDifferences into ignore rules. A jq
// expression that is a plain path becomes a JSON pointer; any other is noted
// as not applied rather than guessed at.
func ignoreDifferences(app *unstructured.Unstructured, notes []string) ([]object.IgnoreRule, []string) {
	items, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
	var rules []object.IgnoreRule
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		str := func(f string) string { v, _ := m[f].(string); return v }
		strs := func(f string) []string {
			l, _ := m[f].([]any)
			var out []string
			for _, v := range l {
				if s, ok := v.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
		r := object.IgnoreRule{Group: str("group"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}
		r.JSONPointers = strs("jsonPointers")
		r.Managers = strs("managedFieldsManagers")
		for _, q := range strs("jqPathExpressions") {
			if p, ok := JQPointer(q); ok {
				r.JSONPointers = append(r.JSONPointers, p)
			} else {
				notes = append(notes, fmt.Sprintf("ignoreDifferences jqPathExpression %q is not a plain path; driftback does not apply it", q))
			}
		}
		if len(r.JSONPointers) == 0 && len(r.Managers) == 0 {
			// Only unsupported expressions: ignoring the whole object
			// would hide more than Argo CD does.
			continue
		}
		rules = append(rules, r)
	}
	return rules, notes
}

var (
	jqSelect = regexp.MustCompile(`^select\(\s*\.([A-Za-z0-9_-]+)\s*==\s*"([^"\\]*)"\s*\)$`)
	jqName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*`)
)

// JQPointer converts a jq path expression of the plain kinds Argo CD users
// write — .spec.a.b, .a[]?.b, .a[0], .a["x.y"], .a[] | select(.name == "x") | .b —
// into a driftback JSON pointer; ok is false for anything else.
func JQPointer(expr string) (string, bool) {
	var out []string
	for i, stage := range strings.Split(expr, "|") {
		stage = strings.TrimSpace(stage)
		if m := jqSelect.FindStringSubmatch(stage); m != nil {
			if i == 0 || len(out) == 0 || out[len(out)-1] != "*" {
				return "", false
			}
			out[len(out)-1] = escapePointer(m[1]) + "=" + escapePointer(m[2])
			continue
		}
		parts, ok := jqPath(stage)
		if !ok {
			return "", false
		}
		out = append(out, parts...)
	}
	if len(out) == 0 {
		return "", false
	}
	return "/" + strings.Join(out, "/"), true
}

func jqPath(s string) ([]string, bool) {
	if s == "." {
		return nil, true
	}
	var out []string
	for s != "" {
		switch {
		case strings.HasPrefix(s, "[]"):
			out = append(out, "*")
			s = strings.TrimPrefix(strings.TrimPrefix(s, "[]"), "?")
		case strings.HasPrefix(s, `["`):
			end := strings.Index(s[2:], `"]`)
			if end < 0 {
				return nil, false
			}
			out = append(out, escapePointer(s[2:2+end]))
			s = s[2+end+2:]
		case strings.HasPrefix(s, "["):
			end := strings.Index(s, "]")
			if end < 0 {
				return nil, false
			}
			n, err := strconv.Atoi(s[1:end])
			if err != nil || n < 0 {
				return nil, false
			}
			out = append(out, strconv.Itoa(n))
			s = s[end+1:]
		case strings.HasPrefix(s, "."):
			s = s[1:]
			if strings.HasPrefix(s, "[") {
				continue
			}
			name := jqName.FindString(s)
			if name == "" {
				return nil, false
			}
			out = append(out, name)
			s = strings.TrimPrefix(s[len(name):], "?")
		default:
			return nil, false
		}
	}
	return out, len(out) > 0
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
