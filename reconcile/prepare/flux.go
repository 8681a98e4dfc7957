package prepare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/driftback/driftback/render"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/provider"
)

// FluxTree returns the tree kustomize-controller builds for a Flux
// Kustomization whose spec.path is dir: the directory's kustomization file
// as Flux's own generator (fluxcd/pkg/kustomize) rewrites it with the
// Kustomization's targetNamespace, namePrefix and nameSuffix, patches,
// components and images — or the one it generates for a plain directory of
// manifests. Render the result with BuildOptions{LoadAnywhere: true}, as
// kustomize-controller loads files from anywhere in the repository.
//
// The generator reads a disk, so it is given a skeleton of the directory in
// a temporary folder: the kustomization file, or for a plain directory an
// empty file per manifest name. No manifest content is parsed here; the
// render child reads the files themselves.
func FluxTree(t *render.Tree, dir string, ks *unstructured.Unstructured) (*render.Tree, error) {
	tmp, err := os.MkdirTemp("", "driftback-flux-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // a leftover temporary folder holds only names
	root := filepath.Join(tmp, "repo")
	put := func(p string, b []byte) error {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return err
		}
		return os.WriteFile(full, b, 0o600)
	}
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(dir)), 0o700); err != nil {
		return nil, err
	}
	if kf := render.KustomizationFile(t, dir); kf != "" {
		b, err := readKustomization(t, kf)
		if err != nil {
			return nil, err
		}
		if err := put(kf, b); err != nil {
			return nil, err
		}
	} else {
		prefix := dir + "/"
		if dir == "." {
			prefix = ""
		}
		for _, f := range t.Files() {
			if !strings.HasPrefix(f, prefix) {
				continue
			}
			ext := path.Ext(f)
			if ext == ".yaml" || ext == ".yml" || render.IsKustomizationName(path.Base(f)) {
				if err := put(f, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	// The generator drops a missing component when told to ignore missing
	// ones: it looks on disk.
	components, _, _ := unstructured.NestedStringSlice(ks.Object, "spec", "components")
	for _, c := range components {
		p := path.Join(dir, c)
		if !strings.HasPrefix(p, "../") && p != ".." && (t.HasDir(p) || t.Has(p)) {
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(p)), 0o700); err != nil {
				return nil, err
			}
		}
	}
	manifest, kfile, _, err := fluxkustomize.NewGenerator(root, *ks).GenerateManifest(filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		return nil, fmt.Errorf("%s: generate the kustomization as Flux does: %w", dir, err)
	}
	rel, err := filepath.Rel(root, kfile)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%s: the generated kustomization lies outside the repository", dir)
	}
	return t.With(map[string][]byte{filepath.ToSlash(rel): manifest}), nil
}

// readKustomization reads a kustomization file the parent process parses,
// bounded as the closure's parser bounds it.
func readKustomization(t *render.Tree, kf string) ([]byte, error) {
	n, err := t.Size(kf)
	if err != nil {
		return nil, err
	}
	if n > render.MaxKustomizationBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d for a kustomization file", kf, n, render.MaxKustomizationBytes)
	}
	return t.ReadFile(kf)
}

// FluxVariables are the values a Flux Kustomization's postBuild substitutes.
type FluxVariables struct {
	// Values are every variable: substituteFrom's ConfigMaps and Secrets,
	// overridden by the inline substitute.
	Values map[string]string
	// Hidden are the values that came from Secrets: they must never be shown.
	Hidden []string
	// Lenient substitutes an unset variable without a default with nothing,
	// as kustomize-controller before Flux 2.9 (or with the
	// StrictPostBuildSubstitutions feature gate off) does; strict, the
	// default, fails the build.
	Lenient bool
}

// FluxFinish does to a Kustomization's rendered objects what
// kustomize-controller does after the build, in its order: postBuild
// substitution (strict, the controller's default since Flux 2.9, unless
// vars.Lenient), then the
// Kustomization's commonMetadata and its owner labels. Objects annotated
// kustomize.toolkit.fluxcd.io/substitute: disabled are left as they are.
func FluxFinish(objs []*unstructured.Unstructured, ks *unstructured.Unstructured, vars FluxVariables) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	if _, ok, _ := unstructured.NestedMap(ks.Object, "spec", "postBuild"); ok {
		// The variables are passed inline, already read: the library does
		// not reach the cluster.
		inline := ks.DeepCopy()
		m := map[string]any{}
		for k, v := range vars.Values {
			m[k] = v
		}
		if err := unstructured.SetNestedField(inline.Object, m, "spec", "postBuild", "substitute"); err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(inline.Object, "spec", "postBuild", "substituteFrom")
		rf := provider.NewDefaultDepProvider().GetResourceFactory()
		for i, o := range objs {
			res, err := rf.FromMap(o.DeepCopy().Object)
			if err != nil {
				return nil, err
			}
			done, err := fluxkustomize.SubstituteVariables(context.Background(), nil, *inline, res,
				fluxkustomize.SubstituteWithDryRun(true), fluxkustomize.SubstituteWithStrict(!vars.Lenient))
			if err != nil {
				return nil, fmt.Errorf("%s/%s %s: postBuild substitution: %w", o.GetKind(), o.GetName(), o.GetNamespace(), hideValues(err, vars.Hidden))
			}
			if done == nil {
				out[i] = o.DeepCopy()
				continue
			}
			// kyaml's maps hold Go ints; through JSON the object holds
			// what the apiserver's decoder gives (int64, float64).
			b, err := done.MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("%s/%s %s: after postBuild substitution: %w", o.GetKind(), o.GetName(), o.GetNamespace(), err)
			}
			var m map[string]any
			if err := utiljson.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("%s/%s %s: after postBuild substitution: %w", o.GetKind(), o.GetName(), o.GetNamespace(), err)
			}
			out[i] = &unstructured.Unstructured{Object: m}
		}
	} else {
		for i, o := range objs {
			out[i] = o.DeepCopy()
		}
	}
	labels, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(ks.Object, "spec", "commonMetadata", "annotations")
	if len(labels) > 0 || len(annotations) > 0 {
		ssautil.SetCommonMetadata(out, labels, annotations)
	}
	owner := map[string]string{
		"kustomize.toolkit.fluxcd.io/name":      ks.GetName(),
		"kustomize.toolkit.fluxcd.io/namespace": ks.GetNamespace(),
	}
	ssautil.SetCommonMetadata(out, owner, nil)
	return out, nil
}

func hideValues(err error, hidden []string) error {
	msg := err.Error()
	for _, h := range hidden {
		if h != "" {
			msg = strings.ReplaceAll(msg, h, "(hidden)")
		}
	}
	return errors.New(msg)
}
