package app

import (
	"context"
	"fmt"
	"time"

	"github.com/driftback/driftback/app/review"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeClient is a controller-runtime client of a cluster, for the
// libraries that take one.
func (a *App) kubeClient(cluster string) (client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.kubeClients[cluster]; ok {
		return c, nil
	}
	cl, ok := a.cfg.Clusters[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q is not one of app.yml's clusters", cluster)
	}
	cfg, err := cl.RESTConfig()
	if err != nil {
		return nil, err
	}
	if a.wrapKube != nil {
		cfg.Wrap(a.wrapKube)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	if a.kubeClients == nil {
		a.kubeClients = map[string]client.Client{}
	}
	a.kubeClients[cluster] = c
	return c, nil
}

// capabilities are a cluster's version and APIs, which its Helm charts
// are rendered for.
func (a *App) capabilities(ctx context.Context, cluster string) (*reconcile.Capabilities, error) {
	c := a.cluster(cluster)
	if c.Err != nil {
		return nil, c.Err
	}
	v, apis, err := c.Reader.Capabilities(ctx)
	if err != nil {
		return nil, err
	}
	return &reconcile.Capabilities{KubeVersion: v, APIVersions: apis}, nil
}

// cluster connects to a named cluster once; a failure is tried again on the
// next job.
func (a *App) cluster(name string) review.Cluster {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clusters[name]
	if !ok {
		c = &review.Cluster{}
		cfg, err := a.cfg.Clusters[name].RESTConfig()
		if err == nil {
			cfg.Timeout = 30 * time.Second
			if a.wrapKube != nil {
				cfg.Wrap(a.wrapKube)
			}
			cfg.UserAgent = "driftback"
			c.Reader, err = livestate.NewClusterReader(cfg)
			if err == nil && a.cfg.Clusters[name].Mode == drift.ModeDryRun {
				c.DryRun, err = livestate.NewServerDryRun(cfg)
			}
		}
		if c.Err = err; err == nil {
			a.clusters[name] = c
		}
	}
	out := *c
	// The drift loop's caches, where this replica runs it, answer what they
	// hold without a request; in dry-run mode the API server is asked.
	if w := a.drift.Watcher(name); w != nil && out.DryRun == nil && out.Err == nil {
		out.Cache = w
	}
	return out
}

// reviewer reviews pull requests with the App's renderer and clusters.
func (a *App) reviewer() *review.Reviewer {
	return &review.Reviewer{
		Renderer: a.renderer, Cluster: a.cluster, Kube: a.kubeClient, Capabilities: a.capabilities, Charts: a.charts, Log: a.log,
		Rendered:        a.metrics.Render,
		ArgoCDNamespace: func(cluster string) string { return a.cfg.Clusters[cluster].Discover.ArgoNamespace() },
		PodSecurity: func(cluster string) admission.PodSecurity {
			p, _ := a.cfg.Clusters[cluster].PodSecurity.Admission() // checked when the configuration was read
			return p
		},
	}
}
