package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v60/github"
)

// The GitHub Actions App: a workflow's GITHUB_TOKEN is its installation
// token, and what the token writes is by its bot user.
const (
	actionsLogin = "github-actions[bot]"
	actionsSlug  = "github-actions"
)

// WithToken is access to GitHub with a token rather than as the App: a
// GitHub Actions workflow's GITHUB_TOKEN (it needs pull-requests: write for
// the comment and checks: write for the check run), or a personal access
// token (comments only: GitHub lets only Apps write check runs). The
// comment is the same as the App's, found again by its marker and its
// author: the token's user, or github-actions[bot] for a workflow's token.
// baseURL is the REST API base ending in "/".
func WithToken(ctx context.Context, token, baseURL string, retry RetryPolicy) (*Installation, error) {
	if token == "" {
		return nil, errors.New("no GitHub token")
	}
	retry = retry.withDefaults()
	gh := github.NewClient(&http.Client{Transport: &retryTransport{next: http.DefaultTransport, policy: retry, pace: newPacer(retry)}}).WithAuthToken(token)
	var err error
	if gh.BaseURL, err = gh.BaseURL.Parse(baseURL); err != nil {
		return nil, fmt.Errorf("GitHub API URL %q: %w", baseURL, err)
	}
	in := &Installation{gh: gh, token: token, login: actionsLogin, app: actionsSlug}
	user, resp, err := gh.Users.Get(ctx, "")
	switch {
	case err == nil:
		in.login = user.GetLogin() // a person's (or a machine user's) token
	case resp != nil && resp.StatusCode == http.StatusForbidden:
		// An installation token is no user: GitHub refuses the question,
		// and the token is a workflow's.
	case resp != nil && resp.StatusCode == http.StatusUnauthorized:
		return nil, errors.New("GitHub refused the token (401 Bad credentials)")
	default:
		return nil, fmt.Errorf("ask GitHub whose token this is: %w", err)
	}
	return in, nil
}
