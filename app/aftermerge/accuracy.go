package aftermerge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift/livestate"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/report"
	"github.com/driftback/driftback/report/prediction"
)

// Live reads live objects by reference (the drift loop's watch caches, or
// the cluster).
type Live interface {
	Get(ctx context.Context, refs []object.Ref) (map[string]*unstructured.Unstructured, error)
}

// Watchers are the drift loop's live caches, by cluster.
type Watchers interface {
	Watcher(cluster string) *livestate.Watcher
}

// WatchedBy reads live objects from the drift loop's caches of the
// clusters it runs here; nil for the others.
func WatchedBy(ws Watchers) func(cluster string) Live {
	return func(cluster string) Live {
		if w := ws.Watcher(cluster); w != nil {
			return w
		}
		return nil
	}
}

// DynamicOf reads the clusters of app.yml.
func DynamicOf(cfg *config.Config) func(cluster string) (dynamic.Interface, error) {
	return func(cluster string) (dynamic.Interface, error) {
		c, ok := cfg.Clusters[cluster]
		if !ok {
			return nil, fmt.Errorf("cluster %s is not in app.yml", cluster)
		}
		rc, err := c.RESTConfig()
		if err != nil {
			return nil, err
		}
		return dynamic.NewForConfig(rc)
	}
}

// Accuracy is how what the comment predicted compares with what the
// reconciler did: driftback's own accuracy, measured on every merge.
type Accuracy struct {
	// Checked counts the objects compared.
	Checked int
	// Unchanged were predicted to change and did not; Unpredicted changed
	// and were not predicted.
	Unchanged, Unpredicted []string
}

// Missed counts the misses.
func (a Accuracy) Missed() int { return len(a.Unchanged) + len(a.Unpredicted) }

func (a Accuracy) String() string {
	if a.Missed() == 0 {
		return "as predicted (" + report.Plural(a.Checked, "object") + ")"
	}
	var parts []string
	if len(a.Unchanged) > 0 {
		parts = append(parts, "predicted but unchanged: "+strings.Join(a.Unchanged, ", "))
	}
	if len(a.Unpredicted) > 0 {
		parts = append(parts, "changed but not predicted: "+strings.Join(a.Unpredicted, ", "))
	}
	return "prediction missed " + strings.Join(parts, "; ")
}

// clockSlack allows for GitHub's and the apiserver's clocks to differ.
const clockSlack = 2 * time.Second

// measure compares a prediction with the live objects after the apply:
// each object predicted to be created or changed must have been written by
// the reconciler since the merge, each predicted to be pruned must be gone;
// the workloads the reconciler changed (Flux, watched) must be predicted.
func measure(ctx context.Context, p prediction.Predicted, live Live, managers []string, merged time.Time, changed []*unstructured.Unstructured) (Accuracy, error) {
	var a Accuracy
	refs := make([]object.Ref, 0, len(p.Changes))
	for _, c := range p.Changes {
		refs = append(refs, c.Ref)
	}
	got, err := live.Get(ctx, refs)
	if err != nil {
		return a, err
	}
	since := merged.Add(-clockSlack)
	predicted := map[string]bool{}
	for _, c := range p.Changes {
		key := c.Ref.Key()
		predicted[c.Ref.Kind+"/"+c.Ref.Namespace+"/"+c.Ref.Name] = true
		u := got[key]
		a.Checked++
		switch c.Action {
		case drift.ActionDelete:
			if u != nil && u.GetDeletionTimestamp() == nil {
				a.Unchanged = append(a.Unchanged, name(c.Ref)+" (still there)")
			}
		case drift.ActionCreate, drift.ActionUpdate:
			if u != nil && u.GetLabels()["helm.toolkit.fluxcd.io/name"] != "" {
				a.Checked-- // a HelmRelease's: helm-controller applies it on its own time
				continue
			}
			if u == nil || !ChangedSince(u, managers, since) {
				a.Unchanged = append(a.Unchanged, name(c.Ref))
			}
		default:
			a.Checked--
		}
	}
	for _, u := range changed {
		if k := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName(); !predicted[k] {
			a.Unpredicted = append(a.Unpredicted, k)
		}
	}
	return a, nil
}

func name(r object.Ref) string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}
