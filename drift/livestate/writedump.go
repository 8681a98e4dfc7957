package livestate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/drift/object"
)

// secretKind is never dumped: a dump holds no Secret's value.
var secretKind = schema.GroupKind{Kind: "Secret"}

// noisyKinds are the kinds a namespace's count leaves out (the server
// makes them, or they mirror others), as the comparison does.
var noisyKinds = map[schema.GroupKind]bool{
	{Kind: "Event"}: true, {Group: "events.k8s.io", Kind: "Event"}: true, {Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
	{Kind: "Endpoints"}: true, {Group: "coordination.k8s.io", Kind: "Lease"}: true,
}

// Dumped is what WriteDump wrote.
type Dumped struct {
	Objects    int
	Kinds      []string // as DumpIndex lists them
	Namespaces []string
	Everywhere []string
}

// WriteDump writes into dir (created, or replaced when it holds an earlier
// dump; refused when it holds anything else) what comparing objs, a render placed where the apply puts it,
// with the live state needs, and the index (DumpIndexFile) that says what
// it holds: the kinds objs hold, Namespaces, claims and volumes, CRDs and
// the custom resources of the CRDs rendered, and every namespaced kind the
// cluster serves (what removing a namespace deletes); in the namespaces the
// objects are in and those objs create, but the custom resources of objs'
// CRDs (everywhere: what removing their CRD deletes). Secrets are never
// written: a dump holds no Secret's value.
func WriteDump(ctx context.Context, live object.LiveReader, objs []*unstructured.Unstructured, dir string) (Dumped, error) {
	kinds, namespaces, everywhere := dumpPlan(objs)
	served, err := live.Kinds(ctx)
	if err != nil {
		return Dumped{}, fmt.Errorf("the cluster could not be read: %w", err)
	}
	namespaced := map[schema.GroupKind]bool{}
	for _, k := range served {
		gk := k.GroupKind()
		namespaced[gk] = k.Namespaced
		if k.Namespaced && gk != secretKind && !noisyKinds[gk] {
			kinds[gk] = true
		}
	}
	// The admission rules a comparison checks the objects against: whole
	// for the cluster-scoped ones, the namespaced ones with every kind.
	for _, gk := range object.AdmissionClusterKinds {
		if _, ok := namespaced[gk]; ok {
			kinds[gk] = true
		}
	}
	// Written whole into a new folder, then put in place of dir: a kind
	// that has no object left must not keep an earlier dump's file.
	if err := replaceable(dir); err != nil {
		return Dumped{}, err
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	tmp, err := os.MkdirTemp(parent, "."+base+"-")
	if err != nil {
		return Dumped{}, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Dumped{}, err
	}
	out := Dumped{Namespaces: namespaces}
	for _, gk := range slices.SortedFunc(maps.Keys(kinds), func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) }) {
		isNamespaced, ok := namespaced[gk]
		if !ok || gk == secretKind {
			continue // not served: nothing of it is live; never a Secret
		}
		var items []any
		where := []string{""} // cluster-scoped, or every namespace
		switch {
		case isNamespaced && !everywhere[gk]:
			where = namespaces
		case isNamespaced:
			out.Everywhere = append(out.Everywhere, strings.TrimPrefix(gk.Group+"/"+gk.Kind, "/"))
		}
		for _, ns := range where {
			l, err := live.List(ctx, gk, ns, nil)
			if err != nil {
				return Dumped{}, fmt.Errorf("list %s: %w", gk, err)
			}
			for _, o := range l {
				items = append(items, o.Object)
			}
		}
		out.Kinds = append(out.Kinds, strings.TrimPrefix(gk.Group+"/"+gk.Kind, "/"))
		out.Objects += len(items)
		if len(items) == 0 {
			continue
		}
		b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		if err != nil {
			return Dumped{}, err
		}
		name := strings.ToLower(strings.TrimPrefix(gk.Group+"_"+gk.Kind, "_")) + ".yaml"
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return Dumped{}, err
		}
	}
	index, err := yaml.Marshal(DumpIndex{APIVersion: "driftback.io/v1", Kind: "Dump", Kinds: out.Kinds, Namespaces: namespaces, Everywhere: out.Everywhere})
	if err != nil {
		return Dumped{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, DumpIndexFile), index, 0o644); err != nil {
		return Dumped{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Dumped{}, err
	}
	return out, os.Rename(tmp, dir)
}

// replaceable refuses a dir that holds anything but an earlier dump: a
// dump replaces the folder it is written to.
func replaceable(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, DumpIndexFile)); err != nil {
		return fmt.Errorf("%s is not empty and holds no earlier dump (%s): a dump replaces the folder it is written to, so give a new or empty one", dir, DumpIndexFile)
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml")) {
			return fmt.Errorf("%s holds %s, which a dump did not write: a dump replaces the folder it is written to, so give a new or empty one", dir, e.Name())
		}
	}
	return nil
}

// dumpPlan is what a comparison of objs needs read (WriteDump): the kinds,
// the namespaces, and the kinds read in every namespace.
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
			if group == "" || kind == "" {
				continue // no custom resource: a CRD cannot define a core kind
			}
			kinds[schema.GroupKind{Group: group, Kind: kind}] = true
			everywhere[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	if len(nss) == 0 {
		nss["default"] = true
	}
	return kinds, slices.Sorted(maps.Keys(nss)), everywhere
}
