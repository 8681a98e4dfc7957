package config

import (
	"github.com/driftback/driftback/drift/livestate"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig connects to a cluster with its configured client limits.
func (c Cluster) RESTConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.Kubeconfig != "" {
			rules.ExplicitPath = c.Kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	return livestate.Configure(cfg, livestate.ClientLimits{QPS: c.QPS, Burst: c.Burst}), nil
}
