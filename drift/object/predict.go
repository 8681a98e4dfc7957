package object

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/driftback/driftback/internal/apidefaults"
	"github.com/driftback/driftback/internal/crddefaults"
)

// BuiltinScheme holds the Go types of the built-in kinds with the
// apiserver's own conversions and defaulting functions. It is driftback's own
// copy: other packages register more kinds into client-go's global scheme
// (controller-runtime adds CRDs), and a kind registered there without an apply
// schema would take the wrong path here.
var BuiltinScheme = sync.OnceValue(apidefaults.NewScheme)

// Predictor computes, without writing to the cluster, the object a server-side
// Apply of desired onto live would leave: the structured merge the apiserver
// runs, with the same schema and the live object's managedFields.
type Predictor struct {
	tc managedfields.TypeConverter

	mu       sync.Mutex
	managers map[schema.GroupVersionKind]*managedfields.FieldManager
}

func newPredictor(tc managedfields.TypeConverter) *Predictor {
	return &Predictor{tc: tc, managers: map[schema.GroupVersionKind]*managedfields.FieldManager{}}
}

func (p *Predictor) manager(gvk schema.GroupVersionKind) (*managedfields.FieldManager, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.managers[gvk]; ok {
		return m, nil
	}
	var (
		m   *managedfields.FieldManager
		err error
	)
	if BuiltinScheme().Recognizes(gvk) {
		m, err = managedfields.NewDefaultFieldManager(p.tc, BuiltinScheme(), BuiltinScheme(), BuiltinScheme(), gvk, gvk.GroupVersion(), "", nil)
	} else {
		u := unstructuredScheme{}
		m, err = managedfields.NewDefaultCRDFieldManager(p.tc, u, u, u, gvk, gvk.GroupVersion(), "", nil)
	}
	if err != nil {
		return nil, err
	}
	p.managers[gvk] = m
	return m, nil
}

// Apply predicts the object a forced server-side apply of desired by manager
// would leave, as the apiserver would store it. Built-in kinds go through
// their Go types, are defaulted and converted to the internal form and back,
// as on the server, so defaults are filled in and quantities come out
// canonical; a custom resource gets the defaults of its CRD's structural
// schema crd (nil: none known).
func (p *Predictor) Apply(live, desired *unstructured.Unstructured, manager string, crd *structuralschema.Structural) (*unstructured.Unstructured, error) {
	gvk := desired.GroupVersionKind()
	fm, err := p.manager(gvk)
	if err != nil {
		return nil, err
	}
	var liveObj runtime.Object = live.DeepCopy()
	builtin := BuiltinScheme().Recognizes(gvk)
	if builtin {
		if liveObj, err = toTyped(live, gvk); err != nil {
			return nil, fmt.Errorf("read live object: %w", err)
		}
	}
	out, err := fm.Apply(liveObj, desired.DeepCopy(), manager, true)
	if err != nil {
		return nil, err
	}
	if !builtin {
		u, ok := out.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%s: apply returned %T", gvk, out)
		}
		return crddefaults.Default(u, crd), nil
	}
	return stored(out, gvk)
}

// Defaulted is an object as the apiserver's validating admission sees it
// on create: a built-in kind defaulted through its Go type; another kind as
// it is.
func Defaulted(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if !BuiltinScheme().Recognizes(u.GroupVersionKind()) {
		return u, nil
	}
	return stored(u.DeepCopy(), u.GroupVersionKind())
}

// stored turns a built-in object into the unstructured form the apiserver
// would answer with: through its Go type, defaulted, converted to the
// internal form and back (which writes quantities the way the server stores
// them, cpu "0.5" as "500m", and fills what conversion fills).
func stored(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		typedObj, err := toTyped(u, gvk)
		if err != nil {
			return nil, err
		}
		obj = typedObj
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj, err := apidefaults.Store(BuiltinScheme(), obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: m}
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func toTyped(u *unstructured.Unstructured, gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := BuiltinScheme().New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// unstructuredScheme converts and creates custom resources, which have no Go
// types: conversion within one version is the identity. Defaulting from the
// CRD's schema is done by apply, which knows the CRD.
type unstructuredScheme struct{}

func (unstructuredScheme) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return errors.New("only unstructured objects convert")
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (unstructuredScheme) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, errors.New("only unstructured objects convert")
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%s: no conversion to %v", u.GroupVersionKind(), gv)
	}
	if target.Version != u.GroupVersionKind().Version {
		return nil, fmt.Errorf("%s: converting a custom resource to %s needs the server (a conversion webhook)", u.GroupVersionKind(), target.Version)
	}
	return u, nil
}

func (unstructuredScheme) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (unstructuredScheme) Default(runtime.Object) {}

func (unstructuredScheme) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fallbackConverter uses a schema where it knows a kind and deduced types
// (maps merge by key, lists are replaced whole) for kinds it does not know,
// which is how apply treats a custom resource without a structural schema.
type fallbackConverter struct {
	primary, deduced managedfields.TypeConverter

	once sync.Once
	pred *Predictor
}

// predictor returns the one predictor of this schema: its field managers
// are built once per kind and shared by every comparison that uses it.
func (c *fallbackConverter) predictor() *Predictor {
	c.once.Do(func() { c.pred = newPredictor(c) })
	return c.pred
}

// NewFallbackConverter reads the kinds tc knows by their schema and any
// other kind by deduced types.
func NewFallbackConverter(tc managedfields.TypeConverter) managedfields.TypeConverter {
	return &fallbackConverter{primary: tc, deduced: managedfields.NewDeducedTypeConverter()}
}

// PredictorFor returns the shared predictor of a converter, or a new one.
func PredictorFor(tc managedfields.TypeConverter) *Predictor {
	if fc, ok := tc.(*fallbackConverter); ok {
		return fc.predictor()
	}
	return newPredictor(tc)
}

func (c *fallbackConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	tv, err := c.primary.ObjectToTyped(obj, opts...)
	if err == nil {
		return tv, nil
	}
	// managedfields does not export its "no corresponding type" error; a
	// scheme-based converter says the kind is not registered instead.
	if runtime.IsNotRegisteredError(err) || strings.Contains(err.Error(), "no corresponding type") || strings.Contains(err.Error(), "no type found matching") {
		return c.deduced.ObjectToTyped(obj, opts...)
	}
	return nil, err
}

func (c *fallbackConverter) TypedToObject(tv *typed.TypedValue) (runtime.Object, error) {
	return c.primary.TypedToObject(tv)
}
