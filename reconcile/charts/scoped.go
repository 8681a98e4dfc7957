package charts

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Reads records what a build reads from the cluster through its client
// (its charts' values, sources and credentials):
// what the default branch's render of a target reads is what a pull
// request's render of it may read beyond the target's namespaces (the
// HelmRepository another Kustomization applies, its credentials).
type Reads struct {
	client.Client
	mu   sync.Mutex
	read map[string]bool
}

// NewReads records the reads made through c.
func NewReads(c client.Client) *Reads { return &Reads{Client: c, read: map[string]bool{}} }

// Get reads through the client and records what it asked for.
func (r *Reads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	r.read[readKey(kindOf(r.Client, obj), key.Namespace, key.Name)] = true
	r.mu.Unlock()
	return r.Client.Get(ctx, key, obj, opts...)
}

// Has says the object was read through r.
func (r *Reads) Has(kind, namespace, name string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read[readKey(kind, namespace, name)]
}

func readKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// Scoped is a client that reads only what allow allows, by kind,
// namespace and name: a pull request's chart reads (valuesFrom, a chart's
// source object and its credentials) go through the target's scope, never
// the cluster-wide rights of the App. Lists are refused: nothing a build
// does lists.
type Scoped struct {
	client.Client
	allow func(kind, namespace, name string) bool
}

// NewScoped reads through c what allow allows.
func NewScoped(c client.Client, allow func(kind, namespace, name string) bool) *Scoped {
	return &Scoped{Client: c, allow: allow}
}

// OutsideScopeError is a read a pull request's build may not make.
type OutsideScopeError struct{ Kind, Namespace, Name string }

func (e *OutsideScopeError) Error() string {
	return fmt.Sprintf("%s %s/%s is outside this target's scope: a pull request reads only the namespaces the target's render on its branch holds, and what that render reads (app.yml's targets[].scope widens it)", e.Kind, e.Namespace, e.Name)
}

// Get reads obj when the scope allows it.
func (s *Scoped) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	kind := kindOf(s.Client, obj)
	if !s.allow(kind, key.Namespace, key.Name) {
		return &OutsideScopeError{Kind: kind, Namespace: key.Namespace, Name: key.Name}
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// List is refused.
func (s *Scoped) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return fmt.Errorf("a pull request's build lists nothing from the cluster")
}

// kindOf is obj's kind, from the object or the client's scheme.
func kindOf(c client.Client, obj runtime.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

// SourceKind says objects of kind are source-controller's chart
// repositories, which hold an address and no secret: a pull request's
// HelmRelease may name one in any namespace (the usual Flux layout keeps
// them in flux-system). Their credentials are another matter: read only
// as the cluster pairs them (fetchedChart).
func SourceKind(kind string) bool { return kind == "HelmRepository" || kind == "OCIRepository" }
