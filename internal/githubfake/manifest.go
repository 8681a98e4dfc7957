package githubfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The manifest flow (docs.github.com: "Registering a GitHub App from a
// manifest"): a browser POSTs the manifest to the web side, which creates the
// App and redirects to the manifest's redirect_url with a code and the state;
// the code is then exchanged, once and within an hour, for the App's
// credentials. The fake skips GitHub's confirmation page: a valid manifest is
// registered at once.

// ManifestCodeTTL is how long a manifest code can be exchanged, as on GitHub.
const ManifestCodeTTL = time.Hour

// RegisteredApp is an App created from a manifest.
type RegisteredApp struct {
	ID   int64
	Slug string
	// Org is the organization that owns the App; empty for the user's account.
	Org string
	// State is the state the registration page passed along.
	State string
	// Manifest is the manifest as received.
	Manifest AppManifest
	// Converted says whether its code was exchanged for the credentials.
	Converted bool
	// The credentials the conversion hands out.
	Key           *rsa.PrivateKey
	PEM           string
	WebhookSecret string
	ClientID      string
	ClientSecret  string
	Created       time.Time
}

// AppManifest is the part of a GitHub App manifest the fake reads.
type AppManifest struct {
	Name           string `json:"name"`
	URL            string `json:"url"`
	Description    string `json:"description"`
	HookAttributes struct {
		URL    string `json:"url"`
		Active bool   `json:"active"`
	} `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultPermissions map[string]string `json:"default_permissions"`
	DefaultEvents      []string          `json:"default_events"`
}

// manifestState is what the manifest flow remembers.
type manifestState struct {
	apps  []*RegisteredApp
	codes map[string]manifestCode
}

// manifestCode is a code waiting for its conversion.
type manifestCode struct {
	app     *RegisteredApp
	expires time.Time
}

// FakeUser owns the Apps registered without an organization.
const FakeUser = "octocat"

// RegisteredApps returns the Apps created from manifests, oldest first.
func (f *Fake) RegisteredApps() []RegisteredApp {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]RegisteredApp, 0, len(f.manifests.apps))
	for _, a := range f.manifests.apps {
		out = append(out, *a)
	}
	return out
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slugOf turns an App's name into its slug the way GitHub does: lower case,
// every run of other characters a single hyphen.
func slugOf(name string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

func (f *Fake) newAppFromManifest(w http.ResponseWriter, r *http.Request, m []string, _ int64) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	raw := r.PostForm.Get("manifest")
	if raw == "" {
		http.Error(w, "the form has no manifest field", http.StatusBadRequest)
		return
	}
	var man AppManifest
	if err := json.Unmarshal([]byte(raw), &man); err != nil {
		http.Error(w, "the manifest is not valid JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	var missing []string
	for key, v := range map[string]string{"name": man.Name, "url": man.URL, "hook_attributes.url": man.HookAttributes.URL, "redirect_url": man.RedirectURL} {
		if v == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		http.Error(w, "the manifest lacks "+strings.Join(missing, ", "), http.StatusBadRequest)
		return
	}
	redirect, err := url.Parse(man.RedirectURL)
	if err != nil || !redirect.IsAbs() {
		http.Error(w, "redirect_url is not an absolute URL", http.StatusBadRequest)
		return
	}
	org := ""
	if len(m) > 1 {
		org = m[1]
	}
	slug := slugOf(man.Name)

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.manifests.apps {
		if a.Slug == slug {
			http.Error(w, "Name is already in use", http.StatusUnprocessableEntity)
			return
		}
	}
	f.nextID++
	app := &RegisteredApp{ID: f.nextID, Slug: slug, Org: org, State: r.URL.Query().Get("state"), Manifest: man, Created: time.Now().UTC()}
	f.manifests.apps = append(f.manifests.apps, app)
	code := randomHex(20)
	if f.manifests.codes == nil {
		f.manifests.codes = map[string]manifestCode{}
	}
	f.manifests.codes[code] = manifestCode{app: app, expires: time.Now().Add(ManifestCodeTTL)}

	q := redirect.Query()
	q.Set("code", code)
	if app.State != "" {
		q.Set("state", app.State)
	}
	redirect.RawQuery = q.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (f *Fake) convertManifest(w http.ResponseWriter, _ *http.Request, m []string, _ int64) {
	f.mu.Lock()
	c, ok := f.manifests.codes[m[1]]
	delete(f.manifests.codes, m[1]) // single use, as on GitHub
	f.mu.Unlock()
	if !ok || time.Now().After(c.expires) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest"})
		return
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": err.Error()})
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	a := c.app
	a.Converted = true
	a.Key = key
	a.PEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	a.WebhookSecret = randomHex(20)
	a.ClientID = "Iv1." + randomHex(8)
	a.ClientSecret = randomHex(20)
	owner := map[string]any{"login": FakeUser, "id": 1, "type": "User"}
	if a.Org != "" {
		owner = map[string]any{"login": a.Org, "id": 2, "type": "Organization"}
	}
	events := a.Manifest.DefaultEvents
	if events == nil {
		events = []string{}
	}
	created := a.Created.Format(time.RFC3339)
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": a.ID, "slug": a.Slug, "node_id": "A_" + strconv.FormatInt(a.ID, 36),
		"owner": owner, "name": a.Manifest.Name, "description": a.Manifest.Description,
		"external_url": a.Manifest.URL, "html_url": f.Server.URL + "/apps/" + a.Slug,
		"created_at": created, "updated_at": created,
		"permissions": a.Manifest.DefaultPermissions, "events": events,
		"client_id": a.ClientID, "client_secret": a.ClientSecret,
		"webhook_secret": a.WebhookSecret, "pem": a.PEM,
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
