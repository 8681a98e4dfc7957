package app

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/reconcile/prepare"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/render"
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
	// Source says what the reconciler finds at the path, read at the head
	// of the branch the target follows from the repository cache: a
	// kustomization, plain manifests (Flux generates the kustomization,
	// Argo CD reads a directory), a Helm chart or jsonnet (not rendered),
	// nothing; or that it is decided at the first pull request.
	Source string `json:"source"`
	// NotRendered says why driftback does not render the target.
	NotRendered string `json:"notRendered,omitempty"`
	Prune       bool   `json:"prune,omitempty"`
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
	// LeftOut says what discovery leaves out: reconciler objects in
	// namespaces it does not read, and the setting that brings them in.
	LeftOut []string `json:"leftOut,omitempty"`
}

// ListTargets reads every discovering cluster once and lists the targets
// cfg serves: discovered and configured, where each comes from, and what
// cannot be rendered. An unreachable cluster is a problem of the list, not
// an error: the rest is still shown.
func ListTargets(ctx context.Context, cfg *config.Config) (*TargetList, error) {
	src := targets.NewSource(cfg, nil)
	var found []*discover.Found
	out := &TargetList{Targets: []TargetInfo{}}
	for _, name := range src.Discovering() {
		rc, err := cfg.Clusters[name].RESTConfig()
		if err != nil {
			out.Problems = append(out.Problems, fmt.Sprintf("cluster %s: %v", name, err))
			continue
		}
		rc.Timeout = 30 * time.Second
		fs, problems, err := discover.List(ctx, rc, src.Options(name))
		if err != nil {
			return nil, err
		}
		for _, p := range problems {
			out.Problems = append(out.Problems, fmt.Sprintf("cluster %s: %s", name, p))
		}
		counts, err := discover.CountLeftOut(ctx, rc, src.Options(name))
		why := ""
		if err != nil {
			why = err.Error()
		}
		out.LeftOut = append(out.LeftOut, targets.SayLeftOut(name, counts, why)...)
		found = append(found, fs...)
	}
	discover.Sort(found)
	ts, skipped := targets.Merge(cfg, found)
	trees := cachedTrees(cfg.Server.CacheDir)
	for _, t := range ts {
		info := TargetInfo{Name: t.Name, Repo: t.Repo, Path: t.Path, Cluster: t.Cluster, Branch: t.Branch,
			From: t.Describe(), Glob: targets.IsGlob(t.Path), Build: "kustomize", Codify: string(t.Policy.Codify)}
		if f := t.Found; f != nil {
			info.Prune = f.Prune
			switch {
			case f.Flux != nil:
				info.Build = "flux"
			case f.Reconciler == discover.ReconcilerArgoCD:
				info.Build = "argocd"
			}
			if f.SelfHeal {
				info.Codify = "off (the reconciler self-heals)"
			}
			info.Notes = reconcile.Notes(t.Build(), reconcile.Vars{})
		}
		var off string
		info.Source, info.NotRendered, off = sourceAt(t, trees)
		if off != "" && !strings.HasPrefix(info.Codify, "off (") {
			info.Codify = "off (" + off + ")"
		}
		if info.Codify == string(config.CodifyOff) && t.CodifyOff != "" {
			info.Codify = "off (" + t.CodifyOff + ")"
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
	out.NotRendered = targets.NotRendered(skipped)
	return out, nil
}

// cachedTrees reads, from the repository cache serve keeps in dir, the tree
// at the head of a branch: never fetched, nil when the cache does not have it.
func cachedTrees(dir string) func(repo, branch string) (*render.Tree, string) {
	return func(repo, branch string) (*render.Tree, string) {
		r := repos.Open(dir, repo)
		if r == nil {
			return nil, ""
		}
		if branch == "" {
			// The default branch is the one the cache keeps, when it
			// keeps one.
			refs, err := r.References()
			if err != nil {
				return nil, ""
			}
			var heads []string
			_ = refs.ForEach(func(ref *plumbing.Reference) error { // never fails
				if ref.Name().IsBranch() {
					heads = append(heads, ref.Name().Short())
				}
				return nil
			})
			if len(heads) != 1 {
				return nil, ""
			}
			branch = heads[0]
		}
		ref, err := r.Reference(plumbing.NewBranchReferenceName(branch), true)
		if err != nil {
			return nil, ""
		}
		tree, err := render.GitTree(r, ref.Hash().String())
		if err != nil {
			return nil, ""
		}
		return tree, branch
	}
}

// sourceAt says what a target's reconciler finds at its path, why driftback
// does not render it, and why its drift is not proposed ("" when it is).
func sourceAt(t targets.Target, trees func(repo, branch string) (*render.Tree, string)) (source, notRendered, codifyOff string) {
	if targets.IsGlob(t.Path) {
		return "the paths the pattern matches at each commit", "", ""
	}
	tree, branch := trees(t.Repo, t.Branch)
	if tree == nil {
		return "decided at the first pull request (the repository is not in the cache yet)", "", ""
	}
	at := " at " + branch
	f := t.Found
	switch {
	case !tree.HasDir(t.Path):
		return "nothing" + at, "", ""
	case tree.HasKustomization(t.Path):
		return "a kustomization" + at, "", ""
	case f != nil && f.Flux != nil:
		return "plain manifests" + at + " (Flux generates the kustomization)", "", ""
	case f != nil && f.Reconciler == discover.ReconcilerArgoCD:
		if why := reconcile.NotWritable(t.Build(), tree); why != "" {
			return "a Helm chart" + at, "", why
		}
		if why := reconcile.NotRenderedAt(t.Build(), tree); why != "" {
			kind := "jsonnet"
			if prepare.ArgoCDSourceType(tree, t.Path) == "Helm" {
				kind = "a Helm chart"
			}
			return kind + at, why, "not rendered"
		}
		return "plain manifests" + at + " (Argo CD reads the directory)", "", ""
	}
	return "no kustomization" + at, "kustomize builds nothing there", "not rendered"
}
