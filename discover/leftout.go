package discover

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// LeftOut counts one kind's reconciler objects in namespaces discovery does
// not read (Options.Namespaces): not compared, and not a word said of them
// otherwise.
type LeftOut struct {
	// Kind names them ("Flux Kustomizations").
	Kind string
	// Namespaces counts them by namespace.
	Namespaces map[string]int
}

// Total is how many there are.
func (l LeftOut) Total() int {
	n := 0
	for _, c := range l.Namespaces {
		n += c
	}
	return n
}

// Say tells a person what is left out and which setting brings it in:
// "74 Flux Kustomizations in namespaces discover.namespaces leaves out
// (apps: 40, media: 34): …".
func (l LeftOut) Say(setting string) string {
	names := make([]string, 0, len(l.Namespaces))
	for ns := range l.Namespaces {
		names = append(names, ns)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := l.Namespaces[names[i]], l.Namespaces[names[j]]
		return a > b || (a == b && names[i] < names[j])
	})
	const most = 5
	var parts []string
	for i, ns := range names {
		if i == most {
			parts = append(parts, fmt.Sprintf("%d more namespaces", len(names)-most))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %d", ns, l.Namespaces[ns]))
	}
	return fmt.Sprintf("%d %s in namespaces %s leaves out (%s) are not compared: list their namespaces there (\"*\" for every namespace) to compare them",
		l.Total(), l.Kind, setting, strings.Join(parts, ", "))
}

// leftOutKinds are the reconciler objects counted when left out.
var leftOutKinds = []struct {
	gvr  schema.GroupVersionResource
	kind string
	flux bool
}{
	{FluxKustomizations, "Flux Kustomizations", true},
	{ArgoCDApplications, "Argo CD Applications", false},
}

// countLeftOut lists, by their metadata only, the reconciler objects of
// every namespace and counts those discovery does not read. Nothing is
// left out when it reads every namespace. A list the credentials refuse
// is an error: what is left out is then unknown.
func countLeftOut(ctx context.Context, meta metadata.Interface, opts Options) ([]LeftOut, error) {
	if len(opts.Namespaces) == 0 || slices.Contains(opts.Namespaces, metav1.NamespaceAll) {
		return nil, nil
	}
	var out []LeftOut
	for _, k := range leftOutKinds {
		if (k.flux && !opts.Flux) || (!k.flux && !opts.ArgoCD) {
			continue
		}
		l := LeftOut{Kind: k.kind, Namespaces: map[string]int{}}
		cont := ""
		for {
			list, err := meta.Resource(k.gvr).List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if apierrors.IsNotFound(err) {
				break // not served: there is none to leave out
			}
			if err != nil {
				return nil, fmt.Errorf("count %s outside the namespaces discovery reads: %w", k.kind, err)
			}
			for _, o := range list.Items {
				if !slices.Contains(opts.Namespaces, o.Namespace) {
					l.Namespaces[o.Namespace]++
				}
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
		if len(l.Namespaces) > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// CountLeftOut counts once the reconciler objects discovery with opts
// leaves out, as a Watcher does on each recheck.
func CountLeftOut(ctx context.Context, cfg *rest.Config, opts Options) ([]LeftOut, error) {
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return countLeftOut(ctx, meta, opts)
}
