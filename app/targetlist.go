package app

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
)

// TargetInfo is one target as `driftback targets` prints it.
type TargetInfo struct {
	Name    string `json:"name"`
	Repo    string `json:"repo"`
	Path    string `json:"path"`
	Cluster string `json:"cluster,omitempty"`
	Branch  string `json:"branch,omitempty"`
	// From says where the target comes from: app.yml, an app.yml glob, or
	// the reconciler object it was discovered from.
	From string `json:"from"`
	// Glob says the path is a pattern, expanded at each commit.
	Glob bool `json:"glob,omitempty"`
	// Build says how it is rendered: kustomize, flux or argocd.
	Build string `json:"build"`
	Prune bool   `json:"prune,omitempty"`
	// Codify is the drift policy; "off (the reconciler self-heals)" when
	// the reconciler reverts live changes itself.
	Codify string   `json:"codify"`
	Notes  []string `json:"notes,omitempty"`
}

// TargetList is what a configuration serves.
type TargetList struct {
	Targets     []TargetInfo        `json:"targets"`
	NotRendered []drift.NotRendered `json:"notRendered,omitempty"`
	// Problems are what discovery could not read.
	Problems []string `json:"problems,omitempty"`
}

// ListTargets reads every discovering cluster once and lists the targets
// cfg serves: discovered and configured, where each comes from, and what
// cannot be rendered. An unreachable cluster is a problem of the list, not
// an error: the rest is still shown.
func ListTargets(ctx context.Context, cfg *Config) (*TargetList, error) {
	src := newTargetSource(cfg, nil)
	var found []*discover.Found
	out := &TargetList{Targets: []TargetInfo{}}
	for _, name := range src.discovering() {
		rc, err := restConfig(cfg.Clusters[name])
		if err != nil {
			out.Problems = append(out.Problems, fmt.Sprintf("cluster %s: %v", name, err))
			continue
		}
		rc.Timeout = 30 * time.Second
		fs, problems, err := discover.List(ctx, rc, src.options(name))
		if err != nil {
			return nil, err
		}
		for _, p := range problems {
			out.Problems = append(out.Problems, fmt.Sprintf("cluster %s: %s", name, p))
		}
		found = append(found, fs...)
	}
	discover.Sort(found)
	targets, skipped := mergeTargets(cfg, found)
	for _, t := range targets {
		info := TargetInfo{Name: t.Name, Repo: t.Repo, Path: t.Path, Cluster: t.Cluster, Branch: t.Branch,
			From: t.describe(), Glob: isGlob(t.Path), Build: "kustomize", Codify: string(t.Policy.Codify)}
		if f := t.found; f != nil {
			info.Prune = f.Prune
			switch {
			case f.Flux != nil:
				info.Build = "flux"
			case f.Kustomize != nil:
				info.Build = "argocd"
			}
			if ok, why := writeBackable(t); !ok {
				info.Codify = "off (" + why + ")"
			}
			if f.SelfHeal {
				info.Codify = "off (the reconciler self-heals)"
			}
			info.Notes = targetNotes(t, fluxVars{})
		}
		out.Targets = append(out.Targets, info)
	}
	sort.SliceStable(out.Targets, func(i, j int) bool {
		a, b := out.Targets[i], out.Targets[j]
		if a.Repo != b.Repo {
			return a.Repo < b.Repo
		}
		return a.Name < b.Name
	})
	out.NotRendered = notRendered(skipped)
	return out, nil
}
