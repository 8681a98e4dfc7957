package drift

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift/object"
)

// DangerSyncFails is a change the reconciler cannot apply at all: a kind
// the cluster does not serve, a reference its build needs that is missing,
// an Application Argo CD refuses to sync.
const DangerSyncFails DangerReason = "sync-fails"

var crdKind, applicationGK, appProjectKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
	schema.GroupKind{Group: "argoproj.io", Kind: "Application"}, "AppProject"

// syncFailures adds, to the changes of the head's objects, what makes the
// sync fail: a kind the cluster does not serve nor the head defines, an
// Argo CD Application whose AppProject is neither live nor in the head.
func (c *comparer) syncFailures(head []*unstructured.Unstructured) error {
	if object.IsPartial(c.live) {
		return nil
	}
	kinds, err := c.live.Kinds(c.ctx)
	if err != nil {
		return err
	}
	served := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		served[k.GroupKind()] = true
	}
	defined := map[schema.GroupKind]bool{}
	projects := map[string]bool{}
	for _, o := range head {
		switch gk := o.GroupVersionKind().GroupKind(); {
		case gk == crdKind:
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			defined[schema.GroupKind{Group: group, Kind: kind}] = true
		case gk.Group == applicationGK.Group && gk.Kind == appProjectKind:
			projects[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	fail := func(o *unstructured.Unstructured, msg string) {
		key := object.RefOf(o).Key()
		for i := range c.t.Changes {
			if c.t.Changes[i].Ref().Key() == key && c.t.Changes[i].Action != ActionDelete {
				c.t.Changes[i].Danger = append(c.t.Changes[i].Danger, Danger{Reason: DangerSyncFails, Count: 1, Message: msg})
			}
		}
	}
	for _, o := range head {
		gvk := o.GroupVersionKind()
		gk := gvk.GroupKind()
		if !served[gk] && !defined[gk] {
			fail(o, fmt.Sprintf("the cluster serves no %s and this change defines no CRD for it: the apply fails (no matches for kind %q in version %q)", gk, gvk.Kind, gvk.GroupVersion()))
			continue
		}
		if gk != applicationGK || !served[schema.GroupKind{Group: applicationGK.Group, Kind: appProjectKind}] {
			continue
		}
		project, _, _ := unstructured.NestedString(o.Object, "spec", "project")
		if project == "" {
			project = "default"
		}
		if projects[o.GetNamespace()+"/"+project] {
			continue
		}
		ref := object.Ref{Group: applicationGK.Group, Version: gvk.Version, Kind: appProjectKind, Namespace: o.GetNamespace(), Name: project}
		live, err := c.live.Get(c.ctx, []object.Ref{ref})
		if err != nil {
			continue // not this target's to read: nothing said
		}
		if live[ref.Key()] == nil {
			fail(o, fmt.Sprintf("its AppProject %s does not exist in %s, nor does this change define it: Argo CD refuses to sync it (application references project %s which does not exist)", project, o.GetNamespace(), project))
		}
	}
	return nil
}

// BuildFails marks a target whose reconciler fails to build it at all (a
// substituteFrom object that is missing and not optional): a sync-fails
// danger on the reconciler object, with its message. Every other object of
// the target is then left as it is live.
func (t *Target) BuildFails(obj object.Ref, message string) {
	ch := newChange(obj, ActionUnchanged)
	ch.Note = "the reconciler's build of this target fails"
	ch.Danger = []Danger{{Reason: DangerSyncFails, Count: 1, Message: message}}
	if t.LiveError == "" {
		t.Changes = append(t.Changes, ch)
	}
	t.PR = append(t.PR, ch)
}
