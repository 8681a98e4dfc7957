package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/provider"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
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
func FluxTree(t *Tree, dir string, ks *unstructured.Unstructured) (*Tree, error) {
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
	if kf := findKustomization(t, dir); kf != "" {
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
			if ext == ".yaml" || ext == ".yml" || isKustomizationName(path.Base(f)) {
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
		if !strings.HasPrefix(p, "../") && p != ".." && (t.isDir(p) || t.Has(p)) {
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
func readKustomization(t *Tree, kf string) ([]byte, error) {
	n, err := t.Size(kf)
	if err != nil {
		return nil, err
	}
	if n > maxKustomizationBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d for a kustomization file", kf, n, maxKustomizationBytes)
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

// ArgoCDKustomize are an Argo CD Application's kustomize options, which Argo
// CD applies to the path's kustomization with `kustomize edit` before it
// builds.
type ArgoCDKustomize struct {
	NamePrefix, NameSuffix, Namespace string
	// Images are `kustomize edit set image` arguments: name[=newName][:tag][@digest].
	Images                                    []string
	CommonLabels, CommonAnnotations           map[string]string
	ForceCommonLabels, ForceCommonAnnotations bool
	// Replicas sets replicas by workload name.
	Replicas map[string]int64
	// Patches are kustomize patches as JSON objects.
	Patches    []map[string]any
	Components []string
}

// ArgoCDTree returns the tree Argo CD builds for an Application of path dir
// with kustomize options o: the kustomization file edited as Argo CD's
// `kustomize edit` commands edit it.
func ArgoCDTree(t *Tree, dir string, o ArgoCDKustomize) (*Tree, error) {
	kf := findKustomization(t, dir)
	if kf == "" {
		return nil, fmt.Errorf("%s: no kustomization file: Argo CD applies it as a plain directory", dir)
	}
	b, err := readKustomization(t, kf)
	if err != nil {
		return nil, err
	}
	var k kustypes.Kustomization
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if o.NamePrefix != "" {
		k.NamePrefix = o.NamePrefix
	}
	if o.NameSuffix != "" {
		k.NameSuffix = o.NameSuffix
	}
	for _, arg := range o.Images {
		setImage(&k, arg)
	}
	for _, name := range sortedKeysOf(o.Replicas) {
		set := false
		for i := range k.Replicas {
			if k.Replicas[i].Name == name {
				k.Replicas[i].Count, set = o.Replicas[name], true
			}
		}
		if !set {
			k.Replicas = append(k.Replicas, kustypes.Replica{Name: name, Count: o.Replicas[name]})
		}
	}
	if k.CommonLabels, err = addMeta(k.CommonLabels, o.CommonLabels, o.ForceCommonLabels, "label"); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if k.CommonAnnotations, err = addMeta(k.CommonAnnotations, o.CommonAnnotations, o.ForceCommonAnnotations, "annotation"); err != nil {
		return nil, fmt.Errorf("%s: %w", kf, err)
	}
	if o.Namespace != "" {
		k.Namespace = o.Namespace
	}
	for _, p := range o.Patches {
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var patch kustypes.Patch
		if err := json.Unmarshal(raw, &patch); err != nil {
			return nil, fmt.Errorf("an Application patch: %w", err)
		}
		k.Patches = append(k.Patches, patch)
	}
	for _, c := range o.Components {
		if !contains(k.Components, c) {
			k.Components = append(k.Components, c)
		}
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	return t.With(map[string][]byte{kf: out}), nil
}

// setImage does what `kustomize edit set image ARG` does to one entry.
func setImage(k *kustypes.Kustomization, arg string) {
	var img kustypes.Image
	name, rest, renamed := strings.Cut(arg, "=")
	if !renamed {
		rest = arg
	}
	if at := strings.Index(rest, "@"); at >= 0 {
		img.Digest, rest = rest[at+1:], rest[:at]
	}
	if c := strings.LastIndex(rest, ":"); c >= 0 && !strings.Contains(rest[c:], "/") {
		img.NewTag, rest = rest[c+1:], rest[:c]
	}
	if renamed {
		img.Name, img.NewName = name, rest
	} else {
		img.Name = rest
	}
	for i := range k.Images {
		if k.Images[i].Name == img.Name {
			if img.NewName != "" {
				k.Images[i].NewName = img.NewName
			}
			if img.NewTag != "" || img.Digest != "" {
				k.Images[i].NewTag, k.Images[i].Digest = img.NewTag, img.Digest
			}
			return
		}
	}
	k.Images = append(k.Images, img)
}

func addMeta(have, add map[string]string, force bool, what string) (map[string]string, error) {
	if len(add) == 0 {
		return have, nil
	}
	if have == nil {
		have = map[string]string{}
	}
	for _, key := range sortedKeysOf(add) {
		if _, ok := have[key]; ok && !force && have[key] != add[key] {
			return nil, fmt.Errorf("%s %s is already in the kustomization; Argo CD's kustomize edit fails without force", what, key)
		}
		have[key] = add[key]
	}
	return have, nil
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
