package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/render"
)

// secretKind is never dumped: a dump holds no Secret's value.
var secretKind = schema.GroupKind{Kind: "Secret"}

// noisyKinds are the kinds a namespace's count leaves out (the server
// makes them, or they mirror others), as the comparison does.
var noisyKinds = map[schema.GroupKind]bool{
	{Kind: "Event"}: true, {Group: "events.k8s.io", Kind: "Event"}: true, {Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
	{Kind: "Endpoints"}: true, {Group: "coordination.k8s.io", Kind: "Lease"}: true,
}

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump", "dump --repo DIR [--ref REF] --path OVERLAY... --kubeconfig FILE [--context NAME] --out DIR", stderr)
	repo := fs.String("repo", ".", "repository `DIR` (its root)")
	ref := fs.String("ref", "", "render at this branch, tag or SHA (default: the working tree)")
	var paths multiFlag
	fs.Var(&paths, "path", "an overlay whose live state to dump (repeatable)")
	kubeconfig := fs.String("kubeconfig", "", "read the cluster through this kubeconfig `FILE`")
	kubeContext := fs.String("context", "", "the kubeconfig context")
	limits := clientLimitFlags(fs)
	argoNS := fs.String("argocd-namespace", "argocd", "the namespace of Argo CD and its Applications")
	out := fs.String("out", "", "write the dump into this `DIR` (created; files there of the same names are replaced)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "driftback dump: "+format+"\n", a...)
		return exitError
	}
	overlays, err := overlayArgs(paths)
	switch {
	case err != nil:
		return fail("%v", err)
	case len(overlays) == 0:
		return fail("give --path OVERLAY: the dump holds what comparing it needs")
	case *kubeconfig == "":
		return fail("give --kubeconfig: the dump is read from the cluster")
	case *out == "":
		return fail("give --out DIR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tree, err := openTree(*repo, *ref)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := kubeConfig(*kubeconfig, *kubeContext, *limits)
	if err != nil {
		return fail("%v", err)
	}
	reader, err := livestate.NewClusterReader(cfg)
	if err != nil {
		return fail("%v", err)
	}
	// Built as diff builds them: as the reconciler on the cluster does,
	// with their charts, so the namespaces and kinds are the same.
	setup := buildSetup{cfg: cfg, argoNS: *argoNS, base: tree, renderer: render.New(render.DefaultOptions())}
	var gitRepo *git.Repository
	if g, err := gitrepo.Open(*repo); err == nil {
		gitRepo = g
	}
	if setup.found, err = reconcilersOnCluster(ctx, cfg, *argoNS, remoteKeys(gitRepo)); err != nil {
		fmt.Fprintf(stderr, "driftback dump: the reconciler objects on the cluster could not be read, so the paths are built plainly: %v\n", err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "driftback dump: "+format+"\n", a...) }
	var objs []*unstructured.Unstructured
	for i, b := range builds(ctx, overlays, nil, setup, say) {
		o, problems := b.Objects(ctx, setup.renderer, tree)
		if len(problems) > 0 {
			return fail("%s does not render: %s", overlays[i], strings.Join(problems, "; "))
		}
		// Where the apply puts what names no namespace.
		if o, err = object.Place(ctx, reader, o, b.DefaultNamespace()); err != nil {
			return fail("%v", err)
		}
		objs = append(objs, o...)
	}
	kinds, namespaces, everywhere := dumpPlan(objs)
	served, err := reader.Kinds(ctx)
	if err != nil {
		return fail("the cluster could not be read: %v", err)
	}
	// What removing a namespace deletes: every kind it can hold.
	namespaced := map[schema.GroupKind]bool{}
	for _, k := range served {
		gk := k.GroupKind()
		namespaced[gk] = k.Namespaced
		if k.Namespaced && gk != secretKind && !noisyKinds[gk] {
			kinds[gk] = true
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fail("%v", err)
	}
	var held []string
	count := 0
	for _, gk := range sortedKinds(kinds) {
		isNamespaced, ok := namespaced[gk]
		if !ok {
			continue // not served: nothing of it is live
		}
		var items []any
		where := []string{""} // cluster-scoped, or every namespace
		if isNamespaced && !everywhere[gk] {
			where = namespaces
		}
		for _, ns := range where {
			l, err := reader.List(ctx, gk, ns, nil)
			if err != nil {
				return fail("list %s: %v", kindName(gk), err)
			}
			for _, o := range l {
				items = append(items, o.Object)
			}
		}
		held = append(held, strings.TrimPrefix(gk.Group+"/"+gk.Kind, "/"))
		count += len(items)
		if len(items) == 0 {
			continue
		}
		b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		if err != nil {
			return fail("%v", err)
		}
		name := strings.ToLower(strings.TrimPrefix(gk.Group+"_"+gk.Kind, "_")) + ".yaml"
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			return fail("%v", err)
		}
	}
	index, err := yaml.Marshal(livestate.DumpIndex{APIVersion: "driftback.io/v1", Kind: "Dump", Kinds: held, Namespaces: namespaces})
	if err != nil {
		return fail("%v", err)
	}
	if err := os.WriteFile(filepath.Join(*out, livestate.DumpIndexFile), index, 0o644); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stderr, "driftback dump: wrote %d objects of %d kinds, in %s, to %s; Secrets are never written (a dump holds no Secret's value): a comparison says they are not compared\n",
		count, len(held), plural(len(namespaces), "namespace"), *out)
	return exitOK
}

// dumpPlan is what a comparison of objs needs read: the kinds rendered
// (Secrets aside), Namespaces, claims and volumes, CRDs and the custom
// resources of the CRDs rendered; in the namespaces the objects are in, and
// those the render creates, but the custom resources (everywhere: what
// removing their CRD deletes).
func dumpPlan(objs []*unstructured.Unstructured) (map[schema.GroupKind]bool, []string, map[schema.GroupKind]bool) {
	everywhere := map[schema.GroupKind]bool{}
	kinds := map[schema.GroupKind]bool{
		{Kind: "Namespace"}: true, {Kind: "PersistentVolumeClaim"}: true, {Kind: "PersistentVolume"}: true,
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
	}
	nss := map[string]bool{}
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		if gk != secretKind {
			kinds[gk] = true
		}
		if ns := o.GetNamespace(); ns != "" {
			nss[ns] = true
		}
		switch gk {
		case schema.GroupKind{Kind: "Namespace"}:
			nss[o.GetName()] = true
		case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			kinds[schema.GroupKind{Group: group, Kind: kind}] = true
			everywhere[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	if len(nss) == 0 {
		nss["default"] = true
	}
	return kinds, slices.Sorted(maps.Keys(nss)), everywhere
}

func sortedKinds(m map[schema.GroupKind]bool) []schema.GroupKind {
	out := make([]schema.GroupKind, 0, len(m))
	for gk := range m {
		out = append(out, gk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
