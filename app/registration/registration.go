// Package registration holds what registering the GitHub App checks and
// writes, apart from the page that serves it: the manifest's checks, the
// new-App page's address, the App's slug, and the credential files.
package registration

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/driftback/driftback/app/config"
)

// ValidateManifest checks what GitHub needs before anything is served.
func ValidateManifest(m config.Manifest) error {
	var errs []string
	if m.Name == "" {
		errs = append(errs, "manifest.name: missing")
	} else if Slug(m.Name) == "" {
		errs = append(errs, fmt.Sprintf("manifest.name: %q has no letter or digit", m.Name))
	}
	for _, u := range []struct{ key, value string }{{"manifest.url", m.URL}, {"manifest.hook_attributes.url", m.HookAttributes.URL}} {
		if u.value == "" {
			errs = append(errs, u.key+": missing")
		} else if p, err := url.Parse(u.value); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			errs = append(errs, fmt.Sprintf("%s: %q is not an http(s) URL", u.key, u.value))
		}
	}
	if len(m.DefaultEvents) == 0 {
		errs = append(errs, "manifest.default_events: empty; the App would receive no webhook")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

var orgName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$`)

// URL is where the form posts the manifest: the user's or the
// organization's new-App page, carrying the state GitHub sends back.
func URL(web, org, state string) (string, error) {
	if web == "" {
		return "", errors.New("github.webURL: cannot be derived from github.apiURL; set it to the GitHub web address, such as https://HOST/")
	}
	u, err := url.Parse(web)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("github.webURL: %q is not an http(s) URL", web)
	}
	path := "settings/apps/new"
	if org != "" {
		if !orgName.MatchString(org) {
			return "", fmt.Errorf("organization %q: not a GitHub organization name", org)
		}
		path = "organizations/" + org + "/" + path
	}
	u = u.JoinPath(path)
	u.RawQuery = url.Values{"state": {state}}.Encode()
	return u.String(), nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// Slug is the slug GitHub derives from an App's name.
func Slug(name string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// CredentialFiles are the private key, webhook secret and client secret files.
func CredentialFiles(dir, slug string) []string {
	return []string{
		filepath.Join(dir, slug+".private-key.pem"),
		filepath.Join(dir, slug+".webhook-secret"),
		filepath.Join(dir, slug+".client-secret"),
	}
}

// RefuseExisting refuses when one of files already exists: credentials are
// never overwritten.
func RefuseExisting(files []string) error {
	for _, f := range files {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("%s: already exists; driftback does not overwrite credentials: move it away or choose another output directory", f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SaveCredentials writes each file with mode 0600, refusing to replace any
// file; nothing is written when one of them is in the way.
func SaveCredentials(dir string, files, contents []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := RefuseExisting(files); err != nil {
		return err
	}
	for i, name := range files {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString(contents[i])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
