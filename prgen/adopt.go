package prgen

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/prgen/yamledit"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// serverAnnotations are written by the API server or controllers, never by
// the person who created the object.
var serverAnnotations = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"deployment.kubernetes.io/revision",
	"pv.kubernetes.io/bind-completed",
	"pv.kubernetes.io/bound-by-controller",
	"volume.beta.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/selected-node",
}

// serverFields are set by the API server: identity, bookkeeping, status and
// allocated addresses.
var serverFields = [][]string{
	{"status"},
	{"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "generation"},
	{"metadata", "creationTimestamp"}, {"metadata", "managedFields"}, {"metadata", "selfLink"},
	{"metadata", "deletionTimestamp"}, {"metadata", "deletionGracePeriodSeconds"},
	{"metadata", "finalizers"},
	{"spec", "template", "metadata", "creationTimestamp"},
	{"spec", "jobTemplate", "metadata", "creationTimestamp"},
	{"spec", "jobTemplate", "spec", "template", "metadata", "creationTimestamp"},
}

// stripServerFields returns what a person would have written for obj.
func stripServerFields(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	for _, f := range serverFields {
		unstructured.RemoveNestedField(out.Object, f...)
	}
	if a := out.GetAnnotations(); len(a) > 0 {
		for _, k := range serverAnnotations {
			delete(a, k)
		}
		out.SetAnnotations(a)
	}
	if out.GetKind() == "Service" && out.GroupVersionKind().Group == "" {
		if ip, _, _ := unstructured.NestedString(out.Object, "spec", "clusterIP"); ip != "None" {
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(out.Object, "spec", "clusterIPs")
		}
	}
	if out.GetKind() == "PersistentVolumeClaim" && out.GroupVersionKind().Group == "" {
		unstructured.RemoveNestedField(out.Object, "spec", "volumeName")
	}
	return out
}

// adopt writes an object a person created live into a new file of the
// overlay and lists it in the kustomization's resources, then verifies that
// the overlay now renders it with its live content and everything else as
// before.
func (p *planner) adopt(live *unstructured.Unstructured) (*Adopted, string) {
	clean := stripServerFields(live)
	body, err := sigsyaml.Marshal(clean.Object)
	if err != nil {
		return nil, err.Error()
	}
	manager, at := creator(live)
	header := fmt.Sprintf("# Created in the cluster by %s", manager)
	if at != nil {
		header += " at " + at.UTC().Format("2006-01-02 15:04 UTC")
	}
	content := []byte(header + ", outside Git; adopted by driftback.\n" + string(body))

	base := fmt.Sprintf("%s-%s", strings.ToLower(live.GetKind()), live.GetName())
	file := path.Join(p.in.Overlay, base+".yaml")
	for n := 2; p.exists(file); n++ {
		file = path.Join(p.in.Overlay, fmt.Sprintf("%s-%d.yaml", base, n))
	}
	kust := p.kustomizationFile()
	k, err := p.addResource(kust, path.Base(file))
	if err != nil {
		return nil, err.Error()
	}
	edits := clone(p.edits)
	edits[file] = content
	edits[kust] = k
	_, after, err := p.render(edits)
	if err != nil {
		return nil, "adoption did not render: " + err.Error()
	}
	if len(after) != len(p.objs)+1 {
		return nil, "adoption did not verify: the render does not gain exactly one object"
	}
	var found *unstructured.Unstructured
	for _, o := range after {
		if o.GetKind() == live.GetKind() && o.GetName() == live.GetName() && o.GetNamespace() == live.GetNamespace() {
			found = o
		}
	}
	if found == nil {
		return nil, "adoption did not verify: the overlay renders it under another name or namespace"
	}
	for k := range clean.Object {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !object.SameJSON(clean.Object[k], found.Object[k]) {
			return nil, fmt.Sprintf("adoption did not verify: the overlay's transformers change its %s", k)
		}
	}
	p.edits = edits
	if err := p.rerender(); err != nil {
		return nil, err.Error()
	}
	return &Adopted{Object: objectString(live), File: file, Manager: manager, Time: at}, ""
}

func (p *planner) exists(file string) bool {
	_, edited := p.edits[file]
	return edited || p.in.Tree.Has(file)
}

// creator names the manager that created the object, and when.
func creator(obj *unstructured.Unstructured) (string, *time.Time) {
	for _, e := range obj.GetManagedFields() {
		if e.Subresource == "" {
			if e.Time != nil {
				t := e.Time.Time
				return e.Manager, &t
			}
			return e.Manager, nil
		}
	}
	return "an unknown client", nil
}

// addResource lists a file in the overlay kustomization's resources, keeping
// the file's layout.
func (p *planner) addResource(kust, file string) ([]byte, error) {
	b, err := p.read(kust)
	if err != nil {
		return nil, err
	}
	docs, err := yamledit.ReadDocs(b)
	if err != nil || len(docs) == 0 {
		return nil, fmt.Errorf("%s: %v", kust, err)
	}
	if f := docs[0].Field("resources"); f != nil {
		if out, ok := yamledit.AppendToList(b, f, "- "+file); ok {
			return out, nil
		}
		if err := f.Value.PipeE(yaml.Append(yaml.NewStringRNode(file).YNode())); err != nil {
			return nil, err
		}
		return yamledit.WriteDocs(docs)
	}
	indent := ""
	if strings.Contains(string(b), "\n  - ") {
		indent = "  "
	}
	out := append([]byte{}, b...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, []byte("resources:\n"+indent+"- "+file+"\n")...), nil
}
