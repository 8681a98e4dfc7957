package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/google/go-github/v60/github"
)

// ManifestApp is an App GitHub created from a manifest, with the
// credentials it hands out only once.
type ManifestApp struct {
	ID                               int64
	Slug, Name, HTMLURL              string
	PEM, WebhookSecret, ClientSecret string
}

// CompleteManifest trades the code GitHub returns at the end of the
// manifest flow for the App it created and its credentials.
func CompleteManifest(ctx context.Context, client *http.Client, apiURL, code string) (*ManifestApp, error) {
	gh := github.NewClient(client)
	var err error
	if gh.BaseURL, err = url.Parse(apiURL); err != nil {
		return nil, fmt.Errorf("github.apiURL: %w", err)
	}
	app, resp, err := gh.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("exchange GitHub's code for the App's credentials: %s", exchangeError(resp, err))
	}
	return &ManifestApp{
		ID: app.GetID(), Slug: app.GetSlug(), Name: app.GetName(), HTMLURL: app.GetHTMLURL(),
		PEM: app.GetPEM(), WebhookSecret: app.GetWebhookSecret(), ClientSecret: app.GetClientSecret(),
	}, nil
}

// exchangeError describes a failed exchange without the request's URL, which
// holds the code.
func exchangeError(resp *github.Response, err error) string {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil {
		msg := ge.Message
		if msg == "" {
			msg = http.StatusText(ge.Response.StatusCode)
		}
		return fmt.Sprintf("%d %s", ge.Response.StatusCode, msg)
	}
	if resp != nil && resp.Response != nil {
		return resp.Status
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
