package aftermerge

import (
	"context"
	"regexp"

	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/repos"
	"github.com/driftback/driftback/app/targets"
	"github.com/driftback/driftback/internal/lru"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/render"
)

// Scope is what finding a merge's targets needs.
type Scope struct {
	// Targets are a repository's targets now.
	Targets func(repo string) []targets.Target
	// Leads says this replica runs the cluster's drift loop: only it
	// writes for the cluster's targets.
	Leads func(cluster string) bool
	Cache *repos.Cache
}

// Merged follows a merged pull request on the targets it affected (what
// changed between base, the base branch's commit the pull request was last
// compared with, and the merge commit) whose reconciler is discovered,
// applies baseRef, the branch it merged into, and whose cluster this
// replica leads. It returns once they are found; the
// follows go on in the background, under ctx.
func (fl *Follower) Merged(ctx, jobCtx context.Context, s Scope, m Merge, base, baseRef string) error {
	info, repo, release, err := fetch(jobCtx, fl.deps.GitHub, s.Cache, m, base, m.SHA)
	if err != nil {
		return err
	}
	defer release()
	// A merge commit's first parent is the branch just before it: exactly
	// the pull request's change. A squashed or rebased merge has one
	// parent; then the base the pull request was compared with.
	if c, err := repo.CommitObject(plumbing.NewHash(m.SHA)); err == nil && c.NumParents() == 2 {
		base = c.ParentHashes[0].String()
	}
	before, err := render.GitTreeContext(jobCtx, repo, base)
	if err != nil {
		return err
	}
	after, err := render.GitTreeContext(jobCtx, repo, m.SHA)
	if err != nil {
		return err
	}
	changed, err := render.Changed(before, after)
	if err != nil {
		return err
	}
	var follow []Target
	for _, t := range targets.ExpandGlobs(s.Targets(info.FullName), after) {
		branch := t.Branch
		if branch == "" {
			branch = info.DefaultBranch
		}
		if t.Found == nil || t.Found.Suspended != "" || !s.Leads(t.Cluster) || branch != baseRef {
			continue // no reconciler known, none applies the merge's branch, or another replica writes
		}
		if reconcile.Affects(t.Build(), before, after, changed) {
			follow = append(follow, Target{Name: t.Name, Cluster: t.Cluster, Found: t.Found})
		}
	}
	fl.deps.Log.Info("following a merge", "repo", info.FullName, "pull", m.Number, "sha", m.SHA, "targets", len(follow))
	fl.Follow(ctx, m, follow)
	return nil
}

// HoldsIn says, from the repository cache, whether a commit the reconciler
// applied has the merge commit among its ancestors. Answers are kept (a
// bounded number); a failure to read is not, and is asked again.
func HoldsIn(ctx context.Context, gh func(int64) (*ghapp.Installation, error), cache *repos.Cache) func(Merge, string) bool {
	known := lru.New[bool](4096)
	return func(m Merge, applied string) bool {
		if !fullSHA.MatchString(applied) {
			return false // not a commit (an OCI digest, a tag): never the merge's
		}
		key := m.Owner + "/" + m.Repo + " " + m.SHA + " " + applied
		if held, ok := known.Get(key); ok {
			return held
		}
		held, err := holds(ctx, gh, cache, m, applied)
		if err == nil {
			known.Add(key, held, 1)
		}
		return held
	}
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

func holds(ctx context.Context, gh func(int64) (*ghapp.Installation, error), cache *repos.Cache, m Merge, applied string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, repo, release, err := fetch(ctx, gh, cache, m, m.SHA, applied)
	if err != nil {
		return false, err
	}
	defer release()
	return isAncestor(repo, m.SHA, applied)
}

// fetch brings the merge's repository's default branch and the given
// commits into the cache.
func fetch(ctx context.Context, gh func(int64) (*ghapp.Installation, error), cache *repos.Cache, m Merge, shas ...string) (*ghapp.Repository, *git.Repository, func(), error) {
	i, err := gh(m.Installation)
	if err != nil {
		return nil, nil, nil, err
	}
	info, err := i.Repository(ctx, m.Owner, m.Repo)
	if err != nil {
		return nil, nil, nil, err
	}
	token, err := i.Token(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	repo, release, err := cache.Fetch(ctx, info.FullName, info.CloneURL, token, []string{"refs/heads/" + info.DefaultBranch}, shas)
	if err != nil {
		return nil, nil, nil, err
	}
	return info, repo, release, nil
}

func isAncestor(repo *git.Repository, ancestor, of string) (bool, error) {
	a, err := repo.CommitObject(plumbing.NewHash(ancestor))
	if err != nil {
		return false, err
	}
	b, err := repo.CommitObject(plumbing.NewHash(of))
	if err != nil {
		return false, err
	}
	return a.IsAncestor(b)
}
