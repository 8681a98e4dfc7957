package livestate

import (
	"context"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Capabilities are what a Helm chart's templates learn of a cluster: its
// Kubernetes version and every group/version it serves, with
// group/version/Kind for each kind, as helm-controller and Argo CD pass
// them to Helm.
func (r *ClusterReader) Capabilities(ctx context.Context) (kubeVersion string, apiVersions []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.capsVersion != "" && time.Since(r.capsAt) < discoveryTTL {
		return r.capsVersion, r.capsAPIs, nil
	}
	v, err := r.disc.ServerVersion()
	if err != nil {
		return "", nil, err
	}
	_, lists, err := r.disc.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return "", nil, err
	}
	seen := map[string]bool{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		seen[gv.String()] = true
		for _, res := range l.APIResources {
			seen[gv.String()+"/"+res.Kind] = true
		}
	}
	apis := make([]string, 0, len(seen))
	for k := range seen {
		apis = append(apis, k)
	}
	sort.Strings(apis)
	r.capsVersion, r.capsAPIs, r.capsAt = v.GitVersion, apis, time.Now()
	if err != nil { // an aggregated API down: read again soon
		r.capsAt = time.Now().Add(-discoveryTTL + 5*time.Second)
	}
	return r.capsVersion, r.capsAPIs, nil
}
