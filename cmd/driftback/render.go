package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/driftback/driftback/internal/gitrepo"
	"github.com/driftback/driftback/render"
)

func runRender(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("render", "render --repo DIR [--ref REF] [PATH...]", stderr)
	repo := fs.String("repo", ".", "repository `DIR` (its root)")
	ref := fs.String("ref", "", "render this branch, tag or SHA from the git object store instead of the working tree")
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return parseExit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tree, err := openTree(*repo, *ref)
	if err != nil {
		fmt.Fprintln(stderr, "driftback render:", err)
		return exitError
	}
	overlays, err := overlayArgs(paths)
	if err != nil {
		fmt.Fprintln(stderr, "driftback render:", err)
		return exitError
	}
	if len(overlays) == 0 {
		overlays = render.Discover(tree)
		if len(overlays) == 0 {
			fmt.Fprintf(stderr, "driftback render: no kustomization found in %s\n", *repo)
			return exitError
		}
	}
	res, err := render.New(render.DefaultOptions()).Render(ctx, tree, overlays)
	if err != nil {
		fmt.Fprintln(stderr, "driftback render:", err)
		return exitError
	}
	code := exitOK
	first := true
	for _, o := range res.Overlays {
		if err := o.Err(); err != nil {
			for _, p := range o.Problems {
				if p.File == "" && p.Overlay == o.Path {
					fmt.Fprintf(stderr, "driftback render: %v\n", p) // the problem names the overlay
				} else {
					fmt.Fprintf(stderr, "driftback render: %s: %v\n", o.Path, p)
				}
			}
			code = exitError
			continue
		}
		if len(overlays) > 1 {
			// Several overlays make one stream; a comment names each part.
			if !first {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprintf(stdout, "# Source: %s\n", o.Path)
		}
		first = false
		if _, err := stdout.Write(o.YAML); err != nil {
			fmt.Fprintln(stderr, "driftback render:", err)
			return exitError
		}
	}
	return code
}

// openTree reads the working tree of dir, or ref from its git object store.
func openTree(dir, ref string) (*render.Tree, error) {
	if ref == "" {
		info, err := os.Stat(dir)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", dir)
		}
		return render.DirTree(dir)
	}
	repo, err := gitrepo.Open(dir)
	if err != nil {
		return nil, err
	}
	t, err := render.GitTree(repo, ref)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, refHint(repo, ref, err))
	}
	return t, nil
}

// overlayArgs turns command-line paths into repository-relative overlay paths.
// A leading "/" means the repository root, as in a Flux Kustomization's
// path; a path leaving the repository is refused; one given twice, however
// written, is rendered once.
func overlayArgs(args []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range args {
		p := path.Clean(filepath.ToSlash(a))
		if p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") {
			return nil, fmt.Errorf("overlay %q: give a path within the repository", a)
		}
		if p = render.CleanPath(p); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}
