package livestate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/driftback/driftback/drift/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// DirReader reads a folder of object dumps (`kubectl get -o yaml` or `-o json`,
// Lists included, managedFields kept) as if it were the cluster: for demos, CI
// pipelines without cluster access, and tests.
type DirReader struct {
	objects map[string]*unstructured.Unstructured // by Ref.Key
	order   []string
	// held are the kinds the folder holds: those of its objects, and those
	// its index (DumpIndexFile, written by `driftback dump`) says were
	// read whole, with none found. Of any other kind nothing is known.
	held map[schema.GroupKind]bool
	// partial is false for a fixed set of objects standing for a whole
	// cluster (NewObjectReader).
	partial bool
	// namespaces are where the index says namespaced kinds were read; nil
	// for everywhere. The kinds of everywhere were read in every namespace.
	namespaces map[string]bool
	everywhere map[schema.GroupKind]bool
}

// DumpIndexFile names the file of a dump folder that lists the kinds read
// whole: a kind listed there with no object in the folder has none live.
const DumpIndexFile = "driftback-dump.yaml"

// DumpIndex is the content of DumpIndexFile.
type DumpIndex struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Kinds are the kinds read whole, as "Kind" (core) or "group/Kind".
	Kinds []string `json:"kinds"`
	// Namespaces, when set, are the only namespaces the namespaced kinds
	// were read in, but those of Everywhere.
	Namespaces []string `json:"namespaces,omitempty"`
	// Everywhere are the kinds read in every namespace (as Kinds).
	Everywhere []string `json:"everywhere,omitempty"`
}

// LacksIn implements object.NamespacePartial: a namespaced kind the index
// read in some namespaces only is unknown elsewhere.
func (r *DirReader) LacksIn(gk schema.GroupKind, namespace string) string {
	if why := r.Lacks(gk); why != "" {
		return why
	}
	if r.namespaces == nil || r.namespaces[namespace] || r.everywhere[gk] {
		return ""
	}
	return "the live dump read its namespaced kinds in other namespaces than " + namespace
}

// Lacks implements object.Partial: a kind the folder holds no object of,
// and its index does not list, is unknown.
func (r *DirReader) Lacks(gk schema.GroupKind) string {
	if !r.partial || r.held[gk] {
		return ""
	}
	name := gk.Kind
	if gk.Group != "" {
		name += "." + gk.Group
	}
	return "the live dump has no " + name + " (a dump holds only the kinds it was made of; `driftback dump` makes one with every kind a comparison needs)"
}

// maxDumpFile bounds one dump file.
const maxDumpFile = 256 << 20

// ReadDir loads every .yaml, .yml and .json file under dir.
func ReadDir(dir string) (*DirReader, error) {
	r := &DirReader{objects: map[string]*unstructured.Unstructured{}, held: map[schema.GroupKind]bool{}, partial: true}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isManifest(p) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxDumpFile {
			return fmt.Errorf("%s: %d bytes, over the limit of %d", p, info.Size(), maxDumpFile)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if d.Name() == DumpIndexFile {
			return r.readIndex(p, b)
		}
		objs, err := decodeObjects(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, o := range objs {
			r.add(o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live objects: %w", err)
	}
	sort.Strings(r.order)
	return r, nil
}

// NewObjectReader serves a fixed set of objects as the cluster.
func NewObjectReader(objs []*unstructured.Unstructured) *DirReader {
	r := &DirReader{objects: map[string]*unstructured.Unstructured{}}
	for _, o := range objs {
		r.add(o.DeepCopy())
	}
	sort.Strings(r.order)
	return r
}

// readIndex reads a dump's index of the kinds it read whole.
func (r *DirReader) readIndex(path string, b []byte) error {
	var idx DumpIndex
	if err := utilyaml.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	gk := func(k string) schema.GroupKind {
		if group, kind, ok := strings.Cut(k, "/"); ok {
			return schema.GroupKind{Group: group, Kind: kind}
		}
		return schema.GroupKind{Kind: k}
	}
	for _, k := range idx.Kinds {
		r.held[gk(k)] = true
	}
	r.everywhere = map[schema.GroupKind]bool{}
	for _, k := range idx.Everywhere {
		r.everywhere[gk(k)] = true
	}
	if len(idx.Namespaces) > 0 {
		r.namespaces = map[string]bool{}
		for _, ns := range idx.Namespaces {
			r.namespaces[ns] = true
		}
	}
	return nil
}

func (r *DirReader) add(o *unstructured.Unstructured) {
	if r.held != nil {
		r.held[o.GroupVersionKind().GroupKind()] = true
	}
	k := object.RefOf(o).Key()
	if _, ok := r.objects[k]; !ok {
		r.order = append(r.order, k)
	}
	r.objects[k] = o
}

func (r *DirReader) all() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(r.objects))
	for _, k := range r.order {
		out = append(out, r.objects[k])
	}
	return out
}

func isManifest(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// decodeObjects reads a YAML or JSON stream, expanding Lists.
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			for j := range l.Items {
				out = append(out, &l.Items[j])
			}
			continue
		}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: not a Kubernetes object (no kind or name)", i)
		}
		out = append(out, u)
	}
}

// Get implements LiveReader.
func (r *DirReader) Get(_ context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, ref := range refs {
		if o, ok := r.objects[ref.Key()]; ok {
			out[ref.Key()] = o.DeepCopy()
		}
	}
	return out, nil
}

// List implements LiveReader.
func (r *DirReader) List(_ context.Context, gk schema.GroupKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, k := range r.order {
		o := r.objects[k]
		if o.GroupVersionKind().GroupKind() != gk {
			continue
		}
		if namespace != "" && o.GetNamespace() != namespace {
			continue
		}
		if sel != nil && !sel.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		out = append(out, o.DeepCopy())
	}
	return out, nil
}

// Kinds implements LiveReader: the kinds present in the dump.
func (r *DirReader) Kinds(context.Context) ([]object.Kind, error) {
	seen := map[schema.GroupKind]object.Kind{}
	scopes := object.CRDScopes(r.all())
	for _, k := range r.order {
		o := r.objects[k]
		gvk := o.GroupVersionKind()
		if _, ok := seen[gvk.GroupKind()]; ok {
			continue
		}
		namespaced := o.GetNamespace() != ""
		if cluster, ok := scopes[gvk.GroupKind()]; ok {
			namespaced = !cluster
		}
		seen[gvk.GroupKind()] = object.Kind{GroupVersionKind: gvk, Namespaced: namespaced}
	}
	out := make([]object.Kind, 0, len(seen))
	for _, k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// TypeConverter implements SchemaSource with the schemas built into client-go
// for built-in kinds; custom resources are merged by deduced types (maps merge
// by key, lists are replaced whole), which is what apply does for a CRD
// without a structural schema.
func (r *DirReader) TypeConverter(context.Context, []schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	return object.BuiltinTypeConverter(), nil
}
