// Package crddefaults applies a CustomResourceDefinition's structural-schema
// `default` values to custom resources the way kube-apiserver's
// apiextensions-apiserver does (customresource_handler.go: structural schema
// per version, PruneDefaults, then defaulting.Default in unstructuredDefaulter).
package crddefaults

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Schemas returns the structural schema of each version of crd that has one,
// keyed by version name, built as the apiserver builds them.
func Schemas(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*structuralschema.Structural, error) {
	out := map[string]*structuralschema.Structural{}
	for _, v := range crd.Spec.Versions {
		val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return nil, err
		}
		if val == nil || val.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, fmt.Errorf("%s %s: convert schema: %w", crd.Name, v.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			if crd.Spec.PreserveUnknownFields {
				continue // legacy non-structural schema: the apiserver applies no defaults
			}
			return nil, fmt.Errorf("%s %s: not structural: %w", crd.Name, v.Name, err)
		}
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("%s %s: prune defaults: %w", crd.Name, v.Name, err)
		}
		out[v.Name] = s
	}
	return out, nil
}

// SchemasFromUnstructured reads a CRD held as unstructured.
func SchemasFromUnstructured(u *unstructured.Unstructured) (map[string]*structuralschema.Structural, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, err
	}
	return Schemas(crd)
}

// Default applies s's defaults to a copy of u. Like the apiserver's decoder,
// it first drops nulls that the schema does not allow and that have no default.
func Default(u *unstructured.Unstructured, s *structuralschema.Structural) *unstructured.Unstructured {
	out := u.DeepCopy()
	if s == nil {
		return out
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(out.Object, s)
	structuraldefaulting.Default(out.Object, s)
	return out
}
