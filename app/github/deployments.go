package github

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"
)

// maxStatusDescription is GitHub's limit on a deployment status's
// description.
const maxStatusDescription = 140

// Deployment finds the deployment of sha to environment, or creates it:
// one per environment and commit however often it is asked (a redelivered
// merge, a replica taking over). Its commit's checks are not required.
func (i *Installation) Deployment(ctx context.Context, owner, name, sha, environment, description string) (int64, error) {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return 0, err
	}
	existing, _, err := i.gh.Repositories.ListDeployments(ctx, owner, name, &github.DeploymentsListOptions{SHA: sha, Environment: environment})
	if err != nil {
		return 0, fmt.Errorf("list the deployments of %s: %w", shortSHA(sha), err)
	}
	for _, d := range existing {
		if d.GetCreator().GetLogin() == bot { // another tool's deployment is not driftback's to write
			return d.GetID(), nil
		}
	}
	d, _, err := i.gh.Repositories.CreateDeployment(ctx, owner, name, &github.DeploymentRequest{
		Ref: github.String(sha), Environment: github.String(environment), Description: github.String(statusText(description)),
		AutoMerge: github.Bool(false), RequiredContexts: &[]string{}, TransientEnvironment: github.Bool(false),
	})
	if err != nil {
		return 0, fmt.Errorf("create the deployment of %s to %s: %w", shortSHA(sha), environment, err)
	}
	return d.GetID(), nil
}

// DeploymentLatest is a deployment's latest state and description; empty
// when it has none.
func (i *Installation) DeploymentLatest(ctx context.Context, owner, name string, id int64) (state, description string, err error) {
	latest, _, err := i.gh.Repositories.ListDeploymentStatuses(ctx, owner, name, id, &github.ListOptions{PerPage: 1})
	if err != nil {
		return "", "", fmt.Errorf("read deployment %d: %w", id, err)
	}
	if len(latest) == 0 {
		return "", "", nil
	}
	return latest[0].GetState(), latest[0].GetDescription(), nil
}

// DeploymentState sets a deployment's state ("in_progress", "success",
// "failure") and description, unless its latest status already says so:
// a status is written when what it says changes, never again for nothing.
func (i *Installation) DeploymentState(ctx context.Context, owner, name string, id int64, state, description string) error {
	description = statusText(description)
	if st, desc, err := i.DeploymentLatest(ctx, owner, name, id); err != nil {
		return err
	} else if st == state && desc == description {
		return nil
	}
	if _, _, err := i.gh.Repositories.CreateDeploymentStatus(ctx, owner, name, id, &github.DeploymentStatusRequest{
		State: github.String(state), Description: github.String(description), AutoInactive: github.Bool(true),
	}); err != nil {
		return fmt.Errorf("set deployment %d %s: %w", id, state, err)
	}
	return nil
}

// statusText is a description within GitHub's limit, in characters, cut
// with an ellipsis.
func statusText(s string) string {
	r := []rune(s)
	if len(r) <= maxStatusDescription {
		return s
	}
	return string(r[:maxStatusDescription-1]) + "…"
}

func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// maxCommentBody is GitHub's limit on a comment's body, in characters.
const maxCommentBody = 65536

// CommentSection writes section at the end of the first part of driftback's
// comment on a pull request, after marker, replacing what followed marker
// there before; the rest of the comment stays as it is. Without a comment
// of driftback's, nothing is written.
func (i *Installation) CommentSection(ctx context.Context, owner, name string, number int, marker, section string) error {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return err
	}
	ours, err := ourComments(ctx, i.gh, bot, owner, name, number)
	if err != nil || len(ours) == 0 {
		return err
	}
	body := ours[0].GetBody()
	if at := strings.LastIndex(body, "\n"+marker+"\n"); at >= 0 {
		body = body[:at]
	}
	body += "\n" + marker + "\n" + section
	if len([]rune(body)) > maxCommentBody {
		return fmt.Errorf("the comment on #%d has no room for %d more characters", number, len(section))
	}
	if _, _, err := i.gh.Issues.EditComment(ctx, owner, name, ours[0].GetID(), &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("edit the comment on #%d: %w", number, err)
	}
	return nil
}

// CommentBody is driftback's comment on a pull request, its parts joined;
// "" when there is none.
func (i *Installation) CommentBody(ctx context.Context, owner, name string, number int) (string, error) {
	bot, err := i.botLogin(ctx)
	if err != nil {
		return "", err
	}
	ours, err := ourComments(ctx, i.gh, bot, owner, name, number)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range ours {
		b.WriteString(c.GetBody() + "\n")
	}
	return b.String(), nil
}
