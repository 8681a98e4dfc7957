package livestate

import (
	"context"
	"sync"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServerDryRun asks the apiserver what a server-side apply would store, with
// dry-run, through Flux's ssa engine: exact, with defaulting, validation and
// admission webhooks. It needs the patch verb on every kind it diffs, and RBAC
// cannot limit patch to dry-run: it is write access.
type ServerDryRun struct {
	client client.Client

	mu       sync.Mutex
	managers map[string]*ssa.ResourceManager
}

// NewServerDryRun returns a dry-run applier for the cluster cfg reaches. A
// cfg without client rate limits gets driftback's.
func NewServerDryRun(cfg *rest.Config) (*ServerDryRun, error) {
	c, err := client.New(Configure(cfg, ClientLimits{}), client.Options{})
	if err != nil {
		return nil, err
	}
	return &ServerDryRun{client: c, managers: map[string]*ssa.ResourceManager{}}, nil
}

func (s *ServerDryRun) manager(name string) *ssa.ResourceManager {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.managers[name]
	if !ok {
		m = ssa.NewResourceManager(s.client, nil, ssa.Owner{Field: name, Group: "driftback.io"})
		s.managers[name] = m
	}
	return m
}

// DryRunApply implements DryRunner. It returns nil when the apply would
// change nothing.
func (s *ServerDryRun) DryRunApply(ctx context.Context, obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	_, _, after, err := s.manager(manager).Diff(ctx, obj.DeepCopy(), ssa.DefaultDiffOptions())
	if err != nil {
		return nil, err
	}
	return after, nil
}
