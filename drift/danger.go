package drift

import (
	"fmt"
	"sort"
	"strings"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// immutable lists, per kind, the fields the apiserver refuses to change: a
// sync that changes one fails, or must delete and recreate the object.
var immutable = map[schema.GroupKind][]fieldpath.Path{
	{Group: "apps", Kind: "Deployment"}:             {fieldpath.MakePathOrDie("spec", "selector")},
	{Group: "apps", Kind: "ReplicaSet"}:             {fieldpath.MakePathOrDie("spec", "selector")},
	{Group: "apps", Kind: "DaemonSet"}:              {fieldpath.MakePathOrDie("spec", "selector")},
	{Group: "apps", Kind: "StatefulSet"}:            {fieldpath.MakePathOrDie("spec", "selector"), fieldpath.MakePathOrDie("spec", "volumeClaimTemplates"), fieldpath.MakePathOrDie("spec", "serviceName"), fieldpath.MakePathOrDie("spec", "podManagementPolicy")},
	{Kind: "Service"}:                               {fieldpath.MakePathOrDie("spec", "clusterIP"), fieldpath.MakePathOrDie("spec", "clusterIPs")},
	{Group: "batch", Kind: "Job"}:                   {fieldpath.MakePathOrDie("spec", "template"), fieldpath.MakePathOrDie("spec", "selector"), fieldpath.MakePathOrDie("spec", "completions")},
	{Kind: "PersistentVolumeClaim"}:                 {fieldpath.MakePathOrDie("spec", "storageClassName"), fieldpath.MakePathOrDie("spec", "volumeName"), fieldpath.MakePathOrDie("spec", "accessModes"), fieldpath.MakePathOrDie("spec", "selector")},
	{Group: "storage.k8s.io", Kind: "StorageClass"}: {fieldpath.MakePathOrDie("provisioner"), fieldpath.MakePathOrDie("parameters"), fieldpath.MakePathOrDie("reclaimPolicy")},
}

// classify adds the dangers of each change, measuring their blast radius on the
// live cluster.
func (c *comparer) classify(changes []Change, liveObjs map[string]*unstructured.Unstructured) error {
	for i := range changes {
		ch := &changes[i]
		ref := ch.Ref()
		l := liveObjs[ref.Key()]
		var err error
		switch ch.Action {
		case ActionDelete:
			err = c.deleteDangers(ch, l)
		case ActionUpdate:
			immutableDangers(ch)
		}
		if err != nil {
			return fmt.Errorf("%s: measure the blast radius: %w", ref, err)
		}
	}
	return nil
}

// gitDangers adds to the pull request's own change (head against base) every
// danger its rendered objects show without the cluster. Blast radii that
// need the cluster (how many custom resources, what a namespace holds) are
// marked unknown; the live impact measures them when the cluster is read.
func gitDangers(pr []Change, base, head map[string]*unstructured.Unstructured) {
	for i := range pr {
		ch := &pr[i]
		switch ch.Action {
		case ActionDelete:
			gitDeleteDanger(ch, base[ch.Ref().Key()])
		case ActionUpdate:
			immutableDangers(ch)
		}
	}
	rbacDangers(pr, head, base, "the pull request ")
}

const unknownCount = " (how many: unknown without the cluster)"

func gitDeleteDanger(ch *Change, b *unstructured.Unstructured) {
	if b == nil {
		return
	}
	add := func(reason DangerReason, count int, msg string) {
		ch.Danger = append(ch.Danger, Danger{Reason: reason, Count: count, Message: msg, CountUnknown: true})
	}
	switch ch.Ref().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		kind, _, _ := unstructured.NestedString(b.Object, "spec", "names", "kind")
		add(DangerCRDRemoval, 0, fmt.Sprintf("removing the CRD deletes every %s with it%s", kind, unknownCount))
	case schema.GroupKind{Kind: "Namespace"}:
		add(DangerNamespaceRemoval, 0, "removing the namespace deletes everything in it"+unknownCount)
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		add(DangerPVCRemoval, 1, "removing the claim can delete its data (which volume and its reclaim policy: unknown without the cluster)")
	case schema.GroupKind{Kind: "PersistentVolume"}:
		add(DangerPVRemoval, 1, "removing "+describePV(b))
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		templates, _, _ := unstructured.NestedSlice(b.Object, "spec", "volumeClaimTemplates")
		if len(templates) == 0 {
			return
		}
		policy, _, _ := unstructured.NestedString(b.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
		msg := "the StatefulSet has volume claim templates; its claims"
		if policy == "Delete" {
			msg += " are deleted with it (persistentVolumeClaimRetentionPolicy whenDeleted: Delete): their data is lost"
		} else {
			msg += " stay behind, unmounted, and a new StatefulSet of the same name reuses them"
		}
		add(DangerStatefulSetPVC, 0, msg+unknownCount)
	}
}

// mergeGitDangers adds to the live impact the dangers of the Git change the
// cluster cannot make moot: a role the pull request widens is flagged even
// when the cluster already grants as much. Deletions and immutable fields
// are the live impact's to measure: an object absent live loses nothing.
func mergeGitDangers(changes, pr []Change) {
	at := map[string]int{}
	for i, c := range changes {
		at[c.Ref().Key()] = i
	}
	for _, p := range pr {
		for _, d := range p.Danger {
			if d.Reason != DangerRBACEscalation {
				continue
			}
			if i, ok := at[p.Ref().Key()]; ok && !hasDanger(&changes[i], d.Reason) {
				changes[i].Danger = append(changes[i].Danger, d)
			}
		}
	}
}

// immutableFields are the fields of a change the apiserver refuses to
// change in place.
func immutableFields(ch *Change) []object.Field {
	paths := immutable[ch.Ref().GroupKind()]
	var hit []object.Field
	for _, f := range ch.Fields {
		for _, p := range paths {
			if object.HasPrefix(f.FieldPath(), p) || object.HasPrefix(p, f.FieldPath()) {
				hit = append(hit, f)
				break
			}
		}
	}
	return hit
}

func immutableDangers(ch *Change) {
	var hit []string
	for _, f := range immutableFields(ch) {
		hit = append(hit, f.Path)
	}
	if len(hit) > 0 {
		ch.Danger = append(ch.Danger, Danger{Reason: DangerImmutableField, Count: len(hit),
			Message: fmt.Sprintf("%s cannot be changed in place: the sync will fail, or needs the object deleted and recreated (%s)", plural(len(hit), "immutable field"), strings.Join(hit, ", "))})
	}
}

func (c *comparer) deleteDangers(ch *Change, l *unstructured.Unstructured) error {
	if l == nil {
		return nil
	}
	gk := ch.Ref().GroupKind()
	switch gk {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		group, _, _ := unstructured.NestedString(l.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(l.Object, "spec", "names", "kind")
		crScope, _, _ := unstructured.NestedString(l.Object, "spec", "scope")
		if s := c.opts.Scope; s != nil && ((crScope == "Cluster" && !s.WholeKind(schema.GroupKind{Group: group, Kind: kind})) || (crScope != "Cluster" && !s.AllNamespaces())) {
			// Counting them means reading every namespace (every object of
			// the kind): not this target's to read.
			ch.Danger = append(ch.Danger, Danger{Reason: DangerCRDRemoval, Count: 1, CountUnknown: true,
				Message: fmt.Sprintf("removing the CRD deletes every %s with it: how many is unknown, %s", kind, scope.Unknown)})
			return nil
		}
		if why := object.Lacks(c.live, schema.GroupKind{Group: group, Kind: kind}); why != "" {
			ch.Danger = append(ch.Danger, Danger{Reason: DangerCRDRemoval, Count: 1, CountUnknown: true,
				Message: fmt.Sprintf("removing the CRD deletes every %s with it: how many is unknown, %s", kind, why)})
			return nil
		}
		crs, err := c.live.List(c.ctx, schema.GroupKind{Group: group, Kind: kind}, "", nil)
		if err != nil {
			return err
		}
		nss := map[string]bool{}
		var lost []Lost
		for _, cr := range crs {
			nss[cr.GetNamespace()] = true
			lost = append(lost, c.lost(cr, ""))
		}
		where := ""
		if len(crs) > 0 && !(len(nss) == 1 && nss[""]) {
			where = " in " + plural(len(nss), "namespace")
		}
		ch.Danger = append(ch.Danger, Danger{Reason: DangerCRDRemoval, Count: len(crs), Lost: capLost(lost),
			Message: fmt.Sprintf("removing the CRD deletes every %s with it: %s%s", kind, plural(len(crs), "custom resource"), where)})
	case schema.GroupKind{Kind: "Namespace"}:
		if !c.opts.Scope.CoversNamespace(l.GetName()) {
			ch.Danger = append(ch.Danger, Danger{Reason: DangerNamespaceRemoval, Count: 1, CountUnknown: true,
				Message: "removing the namespace deletes everything in it: what it holds is unknown, " + scope.Unknown})
			return nil
		}
		counts, lost, err := c.namespaceContents(l.GetName())
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("removing the namespace deletes everything in it: %s", plural(len(lost), "object"))
		if len(counts) > 0 {
			msg += " (" + strings.Join(counts, ", ") + ")"
		}
		partial := object.IsPartial(c.live)
		if partial {
			msg += ", and whatever else it holds: the live state holds some kinds only, so the rest is unknown"
		}
		ch.Danger = append(ch.Danger, Danger{Reason: DangerNamespaceRemoval, Count: len(lost), CountUnknown: partial, Lost: capLost(lost), Message: msg})
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		held, err := c.claimHolds(l)
		if err != nil {
			return err
		}
		if held == "" {
			return nil // an unbound claim holds no data
		}
		ch.Danger = append(ch.Danger, Danger{Reason: DangerPVCRemoval, Count: 1, Message: "the claim is " + held})
	case schema.GroupKind{Kind: "PersistentVolume"}:
		ch.Danger = append(ch.Danger, Danger{Reason: DangerPVRemoval, Count: 1, Message: "removing " + describePV(l)})
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return c.statefulSetDanger(ch, l)
	}
	return nil
}

// describePV says what deleting a persistent volume costs.
func describePV(pv *unstructured.Unstructured) string {
	return "volume " + volumeFate(pv)
}

// volumeFate names a volume, its size and reclaim policy, and what becomes
// of its data once its claim or it is deleted: "pv-cache (5Gi, Delete): its
// data is deleted".
func volumeFate(pv *unstructured.Unstructured) string {
	capacity, _, _ := unstructured.NestedString(pv.Object, "spec", "capacity", "storage")
	policy, _, _ := unstructured.NestedString(pv.Object, "spec", "persistentVolumeReclaimPolicy")
	if policy == "" {
		policy = "Delete"
	}
	s := pv.GetName() + " ("
	if capacity != "" {
		s += capacity + ", "
	}
	s += policy + ")"
	switch policy {
	case "Delete":
		s += ": its data is deleted"
	case "Retain":
		s += ": the data stays on the volume, which nothing mounts"
	}
	return s
}

// claimHolds says what a live claim holds: "bound to pv-cache (5Gi,
// Delete): its data is deleted", or "" for a claim bound to no volume (not
// yet bound, or its volume lost), which holds no data.
func (c *comparer) claimHolds(pvc *unstructured.Unstructured) (string, error) {
	pvName, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName")
	phase, _, _ := unstructured.NestedString(pvc.Object, "status", "phase")
	if pvName == "" || phase == "Lost" {
		return "", nil
	}
	if why := object.Lacks(c.unscoped, schema.GroupKind{Kind: "PersistentVolume"}); why != "" {
		return "bound to volume " + pvName + ", which is not known (" + why + "): its data may be deleted", nil
	}
	// The volume the live claim is bound to belongs to the claim, which is
	// within the scope: it is read whatever the scope.
	pvs, err := c.unscoped.Get(c.ctx, []object.Ref{{Version: "v1", Kind: "PersistentVolume", Name: pvName}})
	if err != nil {
		return "", err
	}
	if pv, ok := pvs[object.Ref{Kind: "PersistentVolume", Name: pvName}.Key()]; ok {
		return "bound to " + volumeFate(pv), nil
	}
	return "bound to volume " + pvName + ", which could not be read: its data may be deleted", nil
}

// lost names an object a removal deletes, with detail when it is more.
func (c *comparer) lost(o *unstructured.Unstructured, detail string) Lost {
	return Lost{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), CreatedBy: createdBy(o),
		InGit: c.inGit[object.RefOf(o).Key()], Detail: detail}
}

// createdBy is the manager of an object's oldest managed-fields entry.
func createdBy(o *unstructured.Unstructured) string {
	var first *metav1.ManagedFieldsEntry
	entries := o.GetManagedFields()
	for i := range entries {
		e := &entries[i]
		if first == nil || (e.Time != nil && (first.Time == nil || e.Time.Before(first.Time))) {
			first = e
		}
	}
	if first == nil {
		return ""
	}
	return first.Manager
}

// capLost sorts what a removal deletes, objects not in Git and claims
// holding data first, and keeps MaxLost of them.
func capLost(l []Lost) []Lost {
	rank := func(x Lost) int {
		switch {
		case !x.InGit && x.Detail != "":
			return 0
		case !x.InGit:
			return 1
		case x.Detail != "":
			return 2
		}
		return 3
	}
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	if len(l) > MaxLost {
		l = l[:MaxLost]
	}
	return l
}

// namespaceContents lists the objects of every namespaced kind in ns, and
// counts them by kind: claims first, with how many hold data.
func (c *comparer) namespaceContents(ns string) ([]string, []Lost, error) {
	kinds, err := c.live.Kinds(c.ctx)
	if err != nil {
		return nil, nil, err
	}
	type count struct {
		kind     string
		n, bound int
	}
	var counts []count
	var lost []Lost
	for _, k := range kinds {
		if !k.Namespaced || ignoredInNamespaceCount[k.GroupKind()] {
			continue
		}
		objs, err := c.live.List(c.ctx, k.GroupKind(), ns, nil)
		if err != nil {
			return nil, nil, err
		}
		if len(objs) == 0 {
			continue
		}
		n := count{kind: k.Kind, n: len(objs)}
		for _, o := range objs {
			detail := ""
			if k.GroupKind() == (schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
				if detail, err = c.claimHolds(o); err != nil {
					return nil, nil, err
				}
				if detail != "" {
					n.bound++
				}
			}
			lost = append(lost, c.lost(o, detail))
		}
		counts = append(counts, n)
	}
	// Claims first: they hold data.
	sort.Slice(counts, func(i, j int) bool {
		pi, pj := counts[i].kind == "PersistentVolumeClaim", counts[j].kind == "PersistentVolumeClaim"
		if pi != pj {
			return pi
		}
		if counts[i].n != counts[j].n {
			return counts[i].n > counts[j].n
		}
		return counts[i].kind < counts[j].kind
	})
	var out []string
	for _, c := range counts {
		s := kindCount(c.n, c.kind)
		if c.kind == "PersistentVolumeClaim" {
			switch {
			case c.bound == c.n:
				s += " holding data"
			case c.bound > 0:
				s += fmt.Sprintf(", %d holding data", c.bound)
			default:
				s += ", bound to no volume"
			}
		}
		out = append(out, s)
	}
	return out, lost, nil
}

// ignoredInNamespaceCount are kinds the server creates in every namespace or
// that mirror others; counting them would only add noise.
var ignoredInNamespaceCount = map[schema.GroupKind]bool{
	{Kind: "Event"}:                                    true,
	{Group: "events.k8s.io", Kind: "Event"}:            true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: true,
	{Kind: "Endpoints"}:                                true,
	{Group: "coordination.k8s.io", Kind: "Lease"}:      true,
}

func (c *comparer) statefulSetDanger(ch *Change, sts *unstructured.Unstructured) error {
	templates, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates")
	if len(templates) == 0 {
		return nil
	}
	pvcs, err := c.live.List(c.ctx, schema.GroupKind{Kind: "PersistentVolumeClaim"}, sts.GetNamespace(), nil)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range templates {
		tm, _ := t.(map[string]any)
		tname, _, _ := unstructured.NestedString(tm, "metadata", "name")
		prefix := tname + "-" + sts.GetName() + "-"
		for _, p := range pvcs {
			if strings.HasPrefix(p.GetName(), prefix) {
				names = append(names, p.GetName())
			}
		}
	}
	sort.Strings(names)
	policy, _, _ := unstructured.NestedString(sts.Object, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
	msg := fmt.Sprintf("the StatefulSet has volume claim templates; its %s", plural(len(names), "claim"))
	if len(names) > 0 {
		msg += " (" + strings.Join(names, ", ") + ")"
	}
	if policy == "Delete" {
		msg += " are deleted with it (persistentVolumeClaimRetentionPolicy whenDeleted: Delete): their data is lost"
	} else {
		msg += " stay behind, unmounted, and a new StatefulSet of the same name reuses them"
	}
	ch.Danger = append(ch.Danger, Danger{Reason: DangerStatefulSetPVC, Count: len(names), Message: msg})
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// kindCount counts objects of a kind in English: "1 ConfigMap", "2
// NetworkPolicies", "3 Ingresses".
func kindCount(n int, kind string) string {
	if n == 1 {
		return "1 " + kind
	}
	switch {
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"), strings.HasSuffix(kind, "ch"), strings.HasSuffix(kind, "sh"):
		return fmt.Sprintf("%d %ses", n, kind)
	case strings.HasSuffix(kind, "y") && !strings.ContainsAny(kind[len(kind)-2:len(kind)-1], "aeiou"):
		return fmt.Sprintf("%d %sies", n, kind[:len(kind)-1])
	}
	return fmt.Sprintf("%d %ss", n, kind)
}

// markBefore marks the dangers a change shares with the base: Git set
// replicas on the autoscaled workload before too; every immutable field the
// sync would change differs live only, not in the pull request.
func markBefore(changes []Change, base map[string]*unstructured.Unstructured) {
	for i := range changes {
		ch := &changes[i]
		for j := range ch.Danger {
			d := &ch.Danger[j]
			switch d.Reason {
			case DangerAutoscaledReplicas:
				if b := base[ch.Ref().Key()]; b != nil {
					_, set, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "replicas")
					d.Before = set
				}
			case DangerImmutableField:
				d.Before = true
				for _, f := range immutableFields(ch) {
					if f.Kind != object.FieldDrift {
						d.Before = false
					}
				}
			}
		}
	}
}
