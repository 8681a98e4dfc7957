package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/reconcile/compare"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftback/driftback/render"
)

// maxKustomizationFile bounds the file --flux-kustomization-file reads.
const maxKustomizationFile = 1 << 20

// argoBuild reads an Argo CD Application from the cluster, to build as it
// does.
func argoBuild(ctx context.Context, name, namespace, kubeconfig, kubeContext string, limits livestate.ClientLimits) (*compare.Build, error) {
	cfg, err := kubeConfig(kubeconfig, kubeContext, limits)
	if err != nil {
		return nil, err
	}
	a, err := getObject(ctx, cfg, discover.ArgoCDApplications, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("--argocd-app %s: %w", name, err)
	}
	return compare.ArgoCD(a, namespace)
}

// getObject reads one object of a resource from the cluster.
func getObject(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// fluxBuild reads the Flux Kustomization the flags name: from a file of the
// repository (as the head has it, else the base), with its inline variables
// only; or from the cluster, with the ConfigMaps and Secrets its
// substituteFrom names, read as kustomize-controller reads them.
func fluxBuild(ctx context.Context, ref, file, kubeconfig, kubeContext string, limits livestate.ClientLimits, base, head *render.Tree) (*compare.Build, error) {
	var ns, name string
	if ref != "" {
		var ok bool
		if ns, name, ok = strings.Cut(ref, "/"); !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--flux-kustomization %q: write NAMESPACE/NAME", ref)
		}
	}
	if file != "" {
		ks, err := kustomizationFromFile(render.CleanPath(file), ns, name, base, head)
		if err != nil {
			return nil, fmt.Errorf("--flux-kustomization-file %s: %w", file, err)
		}
		return compare.Flux(ctx, ks, nil), nil
	}
	cfg, err := kubeConfig(kubeconfig, kubeContext, limits)
	if err != nil {
		return nil, err
	}
	ks, err := getObject(ctx, cfg, discover.FluxKustomizations, ns, name)
	if err != nil {
		return nil, fmt.Errorf("--flux-kustomization %s: %w", ref, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	return compare.Flux(ctx, ks, c), nil
}

// kustomizationFromFile finds the Flux Kustomization in a repository file:
// the one named, or the only one.
func kustomizationFromFile(file, ns, name string, base, head *render.Tree) (*unstructured.Unstructured, error) {
	tree := head
	if !head.Has(file) {
		tree = base
	}
	if !tree.Has(file) {
		return nil, fmt.Errorf("no such file at base or head")
	}
	if n, err := tree.Size(file); err != nil || n > maxKustomizationFile {
		return nil, fmt.Errorf("larger than %d bytes, or unreadable: %v", maxKustomizationFile, err)
	}
	b, err := tree.ReadFile(file)
	if err != nil {
		return nil, err
	}
	objs, err := render.ParseObjects(b)
	if err != nil {
		return nil, err
	}
	var found []*unstructured.Unstructured
	var names []string
	for _, o := range objs {
		if o.GroupVersionKind().Group != discover.FluxKustomizations.Group || o.GetKind() != "Kustomization" {
			continue
		}
		names = append(names, o.GetNamespace()+"/"+o.GetName())
		if name == "" || (o.GetNamespace() == ns && o.GetName() == name) {
			found = append(found, o)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(names) == 0:
		return nil, fmt.Errorf("it holds no Flux Kustomization")
	case name != "":
		return nil, fmt.Errorf("no Kustomization %s/%s in it; it holds %s", ns, name, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("it holds %d Kustomizations (%s): name one with --flux-kustomization NAMESPACE/NAME", len(names), strings.Join(names, ", "))
}

// unsubstituted says whether a render still holds ${…}: Flux variables a
// plain kustomize build leaves as written.
func unsubstituted(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if b, err := json.Marshal(o.Object); err == nil && strings.Contains(string(b), "${") {
			return true
		}
	}
	return false
}
