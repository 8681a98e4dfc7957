// Package syncfail says which changes a reconciler cannot apply at all: a
// kind the cluster does not serve and the change does not define, an Argo
// CD Application whose AppProject does not exist, a target whose build
// fails (a missing substituteFrom object): sync-fails dangers, with the
// reconciler's own message.
package syncfail

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

var crdKind, applicationGK, appProjectKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
	schema.GroupKind{Group: "argoproj.io", Kind: "Application"}, "AppProject"

// Mark adds, to t's live changes of head's objects (the whole render, out
// of scope or not), what makes the sync fail: a kind the cluster does not
// serve and head does not define, an Argo CD Application whose AppProject
// is neither live nor in head in argoNamespace (Argo CD's own, the only
// one it reads AppProjects from; "argocd" when empty): an AppProject that
// could not be read is an error, the rest marked all the same. A live state that holds some kinds only (a dump) says
// nothing of either.
func Mark(ctx context.Context, live object.LiveReader, head []*unstructured.Unstructured, defaultNamespace, argoNamespace string, t *drift.Target) error {
	if argoNamespace == "" {
		argoNamespace = "argocd"
	}
	if live == nil || t.LiveError != "" || object.IsPartial(live) {
		return nil
	}
	// Placed as the comparison placed them, to find their changes.
	head, err := object.Place(ctx, live, head, defaultNamespace)
	if err != nil {
		return err
	}
	kinds, err := live.Kinds(ctx)
	if err != nil {
		return err
	}
	served := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		served[k.GroupKind()] = true
	}
	defined := map[schema.GroupKind]bool{}
	projects := map[string]bool{}
	var unknown []string
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
		for i := range t.Changes {
			if t.Changes[i].Ref().Key() == key && t.Changes[i].Action != drift.ActionDelete {
				t.Changes[i].Danger = append(t.Changes[i].Danger, drift.Danger{Reason: drift.DangerSyncFails, Count: 1, Message: msg})
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
		if projects[argoNamespace+"/"+project] {
			continue
		}
		ref := object.Ref{Group: applicationGK.Group, Version: gvk.Version, Kind: appProjectKind, Namespace: argoNamespace, Name: project}
		got, err := live.Get(ctx, []object.Ref{ref})
		if err != nil {
			// Not known (Argo CD's namespace outside what may be read):
			// said, never taken for "it exists".
			unknown = append(unknown, fmt.Sprintf("whether the AppProject %s of Application %s/%s exists could not be read: %v", project, o.GetNamespace(), o.GetName(), err))
			continue
		}
		if got[ref.Key()] == nil {
			fail(o, fmt.Sprintf("its AppProject %s does not exist in %s, nor does this change define it there: Argo CD refuses to sync it (application references project %s which does not exist)", project, argoNamespace, project))
		}
	}
	if len(unknown) > 0 {
		return errors.New(strings.Join(unknown, "; "))
	}
	return nil
}

// Build marks a target whose reconciler fails to build it at all (a
// substituteFrom object that is missing and not optional): a sync-fails
// danger on the reconciler object, with its message. Nothing else of the
// target is applied, so a sync changes nothing else live: not even what
// the live state could not be compared on (Unread, OutOfScope), whose Git
// dangers no longer count; the pull request's Git change (PR) stays.
func Build(t *drift.Target, obj object.Ref, message string) {
	ch := drift.Change{APIVersion: obj.APIVersion(), Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, Action: drift.ActionUnchanged,
		Note:   "the reconciler's build of this target fails: nothing of it is applied",
		Danger: []drift.Danger{{Reason: drift.DangerSyncFails, Count: 1, Message: message}}}
	if t.LiveError == "" {
		t.Changes, t.Unread, t.OutOfScope = []drift.Change{ch}, nil, nil
	}
	t.PR = append(t.PR, ch)
}

// Objects adds to t's live changes a sync-fails danger on each object of
// fails ("Kind/namespace/name" → the reconciler's message): a release
// helm-controller fails.
func Objects(t *drift.Target, fails map[string]string) {
	for _, list := range [][]drift.Change{t.Changes, t.PR} {
		for i := range list {
			ch := &list[i]
			msg, ok := fails[ch.Kind+"/"+ch.Namespace+"/"+ch.Name]
			if !ok {
				msg, ok = fails[ch.Kind+"//"+ch.Name] // written without a namespace
			}
			if ok && ch.Action != drift.ActionDelete {
				ch.Danger = append(ch.Danger, drift.Danger{Reason: drift.DangerSyncFails, Count: 1, Message: msg})
			}
		}
	}
}
