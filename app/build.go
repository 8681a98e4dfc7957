package app

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
)

// built is a target rendered the way its reconciler builds it.
type built struct {
	objs     []*unstructured.Unstructured
	problems []string
	// absent says the tree has nothing at the target's path.
	absent bool
}

// buildTarget renders t at tree as its reconciler builds it: plain
// kustomize, Flux's generated kustomization then its postBuild
// substitution, commonMetadata and owner labels, or Argo CD's kustomize
// options. Objects Flux never applies (kustomize.toolkit.fluxcd.io/ssa:
// Ignore) are left out.
func buildTarget(ctx context.Context, r *render.Renderer, tree *render.Tree, t Target, vars fluxVars) built {
	f := t.found
	var opts render.BuildOptions
	switch {
	case f != nil && f.Flux != nil:
		if !tree.HasDir(t.Path) {
			return built{absent: true}
		}
		ft, err := render.FluxTree(tree, t.Path, f.Flux)
		if err != nil {
			return built{problems: []string{err.Error()}}
		}
		tree, opts.LoadAnywhere = ft, true
	case f != nil && f.Kustomize != nil:
		if !tree.HasKustomization(t.Path) {
			return built{absent: true}
		}
		at, err := render.ArgoCDTree(tree, t.Path, argoOptions(f.Kustomize))
		if err != nil {
			return built{problems: []string{err.Error()}}
		}
		tree = at
	default:
		if !tree.HasKustomization(t.Path) {
			return built{absent: true}
		}
	}
	res, err := r.RenderWith(ctx, tree, []string{t.Path}, opts)
	if err != nil {
		return built{problems: []string{err.Error()}}
	}
	var b built
	o := res.Overlays[0]
	for _, p := range o.Problems {
		b.problems = append(b.problems, p.Error())
	}
	objs, err := o.Objects()
	if err != nil {
		b.problems = append(b.problems, err.Error())
		return b
	}
	if f != nil && f.Flux != nil && len(b.problems) == 0 {
		ks := f.Flux
		if vars.skip {
			ks = ks.DeepCopy()
			unstructured.RemoveNestedField(ks.Object, "spec", "postBuild")
		}
		if objs, err = render.FluxFinish(objs, ks, vars.FluxVariables); err != nil {
			b.problems = append(b.problems, err.Error())
			return b
		}
		objs = withoutFluxIgnored(objs)
	}
	b.objs = objs
	return b
}

// withoutFluxIgnored drops the objects kustomize-controller never applies.
func withoutFluxIgnored(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if strings.EqualFold(o.GetAnnotations()[discover.FluxSSAAnnotation], "ignore") ||
			strings.EqualFold(o.GetLabels()[discover.FluxSSAAnnotation], "ignore") {
			continue
		}
		out = append(out, o)
	}
	return out
}

// fluxIfNotPresent are ignore rules for objects Flux only creates
// (kustomize.toolkit.fluxcd.io/ssa: IfNotPresent): once they exist, their
// changes are never applied.
func fluxIfNotPresent(objs []*unstructured.Unstructured) []drift.IgnoreRule {
	var out []drift.IgnoreRule
	for _, o := range objs {
		if strings.EqualFold(o.GetAnnotations()[discover.FluxSSAAnnotation], "ifnotpresent") ||
			strings.EqualFold(o.GetLabels()[discover.FluxSSAAnnotation], "ifnotpresent") {
			gvk := o.GroupVersionKind()
			out = append(out, drift.IgnoreRule{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return out
}

func argoOptions(k *discover.ArgoKustomize) render.ArgoCDKustomize {
	o := render.ArgoCDKustomize{
		NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
		Images: k.Images, CommonLabels: k.CommonLabels, CommonAnnotations: k.CommonAnnotations,
		ForceCommonLabels: k.ForceCommonLabels, ForceCommonAnnotations: k.ForceCommonAnnotations,
		Patches: k.Patches, Components: k.Components,
	}
	if len(k.Replicas) > 0 {
		o.Replicas = map[string]int64{}
		for _, r := range k.Replicas {
			o.Replicas[r.Name] = r.Count
		}
	}
	return o
}

// fluxVars are the postBuild variables of one target's build.
type fluxVars struct {
	render.FluxVariables
	// skip leaves substitution out: the variables could not, or may not,
	// be read.
	skip bool
	// note says why, for the comment.
	note string
}

// fluxVariables reads a Flux target's postBuild variables from the cluster
// its Kustomization lives on, as kustomize-controller does. live false (a
// fork's pull request) reads nothing from the cluster.
func (a *App) fluxVariables(ctx context.Context, t Target, live bool) fluxVars {
	f := t.found
	if f == nil || f.Flux == nil {
		return fluxVars{}
	}
	if _, ok, _ := unstructured.NestedMap(f.Flux.Object, "spec", "postBuild"); !ok {
		return fluxVars{}
	}
	from, _, _ := unstructured.NestedSlice(f.Flux.Object, "spec", "postBuild", "substituteFrom")
	inline, _, _ := unstructured.NestedStringMap(f.Flux.Object, "spec", "postBuild", "substitute")
	v := fluxVars{FluxVariables: render.FluxVariables{Values: map[string]string{}}}
	if len(from) > 0 {
		if !live {
			return fluxVars{skip: true, note: "postBuild variables are not substituted on this pull request: they come from ConfigMaps and Secrets in the cluster, which a fork's pull request does not read"}
		}
		c, err := a.kubeClient(f.On)
		var loaded map[string]string
		if err == nil {
			collect := fluxkustomize.ContextWithSecretVarsCollector(ctx, func(m map[string]string) {
				for _, s := range m {
					v.Hidden = append(v.Hidden, s)
				}
			})
			loaded, err = fluxkustomize.LoadVariables(collect, c, *f.Flux)
		}
		if err != nil {
			return fluxVars{skip: true, note: "postBuild variables are not substituted: " + hideIn(err.Error(), v.Hidden)}
		}
		for k, val := range loaded {
			v.Values[k] = val
		}
	}
	for k, val := range inline {
		v.Values[k] = strings.ReplaceAll(val, "\n", "")
	}
	// Longest first, so a value that contains another is hidden whole.
	sort.Slice(v.Hidden, func(i, j int) bool { return len(v.Hidden[i]) > len(v.Hidden[j]) })
	return v
}

// kubeClient is a controller-runtime client of a cluster, for the
// libraries that take one.
func (a *App) kubeClient(cluster string) (client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.kubeClients[cluster]; ok {
		return c, nil
	}
	cl, ok := a.cfg.Clusters[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q is not one of app.yml's clusters", cluster)
	}
	cfg, err := restConfig(cl)
	if err != nil {
		return nil, err
	}
	if a.wrapKube != nil {
		cfg.Wrap(a.wrapKube)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	if a.kubeClients == nil {
		a.kubeClients = map[string]client.Client{}
	}
	a.kubeClients[cluster] = c
	return c, nil
}

func hideIn(s string, hidden []string) string {
	for _, h := range hidden {
		if h != "" {
			s = strings.ReplaceAll(s, h, "(hidden)")
		}
	}
	return s
}

// redact replaces every occurrence of the hidden values in the strings of
// v (a pointer), wherever they are: values substituted from Secrets are
// never shown.
func redact(v any, hidden []string) {
	if len(hidden) == 0 {
		return
	}
	redactValue(reflect.ValueOf(v), hidden)
}

func redactValue(v reflect.Value, hidden []string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			redactValue(v.Elem(), hidden)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if e := v.Elem(); e.Kind() == reflect.String {
			if r := hideIn(e.String(), hidden); r != e.String() && v.CanSet() {
				v.Set(reflect.ValueOf(r).Convert(e.Type()))
			}
			return
		}
		redactValue(v.Elem(), hidden)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			redactValue(v.Field(i), hidden)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			redactValue(v.Index(i), hidden)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.String || (e.Kind() == reflect.Interface && !e.IsNil() && e.Elem().Kind() == reflect.String) {
				s := e.String()
				if e.Kind() == reflect.Interface {
					s = e.Elem().String()
				}
				if r := hideIn(s, hidden); r != s {
					v.SetMapIndex(k, reflect.ValueOf(r).Convert(e.Type()))
				}
				continue
			}
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			redactValue(c, hidden)
			v.SetMapIndex(k, c)
		}
	case reflect.String:
		if v.CanSet() {
			if r := hideIn(v.String(), hidden); r != v.String() {
				v.SetString(r)
			}
		}
	}
}
