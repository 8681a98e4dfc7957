package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	ghapp "github.com/driftback/driftback/app/github"

	"github.com/driftback/driftback/app/config"
	appreg "github.com/driftback/driftback/app/registration"
)

// DefaultRegisterListen is where `driftback register` serves its page: the
// loopback interface, on the port of app.yml's example redirect_url
// (http://localhost:8383/callback), so that redirect_url is used as written.
const DefaultRegisterListen = "127.0.0.1:8383"

// RegisterOptions tunes Register.
type RegisterOptions struct {
	// Org registers the App under this organization; empty: under the account
	// of the person who confirms it on GitHub.
	Org string
	// OutDir receives the private key and the secrets; empty: the current
	// directory. It is created with mode 0700 if missing.
	OutDir string
	// Listen is the local address of the registration page and of GitHub's
	// redirect back; empty: DefaultRegisterListen. Port 0 picks a free port.
	Listen string
	// Out receives what to do next; never a secret. nil: discarded.
	Out io.Writer
	// Ready is called with the page's address once it is served; nil: nothing.
	Ready func(pageURL string)
	// HTTPClient exchanges the code with the API; nil: http.DefaultClient.
	HTTPClient *http.Client
}

// DefaultRegisterOptions registers under the user's account, into the current
// directory, from DefaultRegisterListen.
func DefaultRegisterOptions() RegisterOptions {
	return RegisterOptions{OutDir: ".", Listen: DefaultRegisterListen}
}

// Registration is the App that Register created. It holds no secret: those
// are only in the files.
type Registration struct {
	ID      int64
	Slug    string
	Name    string
	HTMLURL string
	// InstallURL is where the App is installed on accounts and repositories.
	InstallURL string
	// PrivateKeyFile, WebhookSecretFile and ClientSecretFile are the absolute
	// paths of the saved credentials (ClientSecretFile is empty when GitHub
	// handed out no client secret).
	PrivateKeyFile    string
	WebhookSecretFile string
	ClientSecretFile  string
}

// Register creates the GitHub App that app.yml's manifest section describes,
// through GitHub's manifest flow: it serves a local page whose form posts the
// manifest to GitHub, where a person confirms it; GitHub sends the browser back
// to the local callback with a code, which Register exchanges for the App's ID,
// private key and secrets. Those are written to files (mode 0600), never
// printed. Register returns after the first callback that carries the right
// state, whether the exchange worked or not (a code is single use), or when
// ctx ends.
//
// The manifest's redirect_url is kept when it points at the local server (an
// http URL with path /callback, the listening port, and this host: a loopback
// name or address when listening on loopback); otherwise the local callback
// replaces it, since only the local server can take the code.
func Register(ctx context.Context, cfg *config.Config, opts RegisterOptions) (*Registration, error) {
	if opts.OutDir == "" {
		opts.OutDir = "."
	}
	if opts.Listen == "" {
		opts.Listen = DefaultRegisterListen
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	m := cfg.Manifest
	if err := appreg.ValidateManifest(m); err != nil {
		return nil, err
	}
	state, err := newState()
	if err != nil {
		return nil, err
	}
	action, err := appreg.URL(cfg.GitHub.WebURL, opts.Org, state)
	if err != nil {
		return nil, err
	}
	if _, err := url.Parse(cfg.GitHub.APIURL); err != nil {
		return nil, fmt.Errorf("github.apiURL: %w", err)
	}
	exchange := func(ctx context.Context, code string) (*ghapp.ManifestApp, error) {
		return ghapp.CompleteManifest(ctx, opts.HTTPClient, cfg.GitHub.APIURL, code)
	}
	outDir, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return nil, err
	}
	// GitHub derives the slug from the name, so a file that would be in the
	// way is found before anything is registered; the person may still rename
	// the App on GitHub, so saving checks again.
	if err := appreg.RefuseExisting(appreg.CredentialFiles(outDir, appreg.Slug(m.Name))); err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen for the registration page: %w", err)
	}
	base, redirect := localURLs(ln.Addr().(*net.TCPAddr), m.RedirectURL)
	if m.RedirectURL != "" && m.RedirectURL != redirect {
		fmt.Fprintf(opts.Out, "manifest.redirect_url %s is not this registration server; GitHub returns to %s instead.\n", m.RedirectURL, redirect)
	}
	m.RedirectURL = redirect
	manifestJSON, err := json.Marshal(m)
	if err != nil {
		ln.Close()
		return nil, err
	}

	r := &registrar{
		ctx: ctx, exchange: exchange, out: opts.Out, outDir: outDir, state: state, name: m.Name,
		action: action, manifest: string(manifestJSON), page: base + "/",
		hosts: map[string]bool{hostOf(base): true},
		done:  make(chan registerResult, 1),
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if opts.Ready != nil {
		opts.Ready(r.page)
	}

	var res registerResult
	select {
	case res = <-r.done:
	case err := <-served:
		res.err = fmt.Errorf("registration page: %w", err)
	case <-ctx.Done():
		res.err = fmt.Errorf("registration stopped before GitHub sent the App back: %w", ctx.Err())
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close() // a browser that keeps a connection open does not hold up the result
	}
	return res.reg, res.err
}

var validSlug = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func newState() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// localURLs returns the local server's base address and the redirect_url to
// put in the manifest: app.yml's when it points at this server, else
// base + "/callback".
func localURLs(addr *net.TCPAddr, configured string) (base, redirect string) {
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
		if addr.IP.To4() == nil {
			host = "::1"
		}
	}
	base = "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
	u, err := url.Parse(configured)
	if configured == "" || err != nil || u.Scheme != "http" || u.Path != "/callback" || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
		u.Port() != fmt.Sprint(addr.Port) || !sameHost(addr.IP, u.Hostname()) {
		return base, base + "/callback"
	}
	return "http://" + u.Host, configured
}

// sameHost says whether name reaches a server listening on ip.
func sameHost(ip net.IP, name string) bool {
	if ip.IsUnspecified() {
		return true
	}
	if ip.IsLoopback() {
		return isLoopback(name)
	}
	other := net.ParseIP(name)
	return other != nil && other.Equal(ip)
}

func isLoopback(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

type registerResult struct {
	reg *Registration
	err error
}

// registrar serves the registration page and takes GitHub's redirect back.
type registrar struct {
	ctx context.Context
	// exchange trades the code GitHub returns for the App's credentials.
	exchange func(context.Context, string) (*ghapp.ManifestApp, error)
	out      io.Writer
	outDir   string
	state    string
	name     string
	action   string
	manifest string
	page     string
	// hosts are the host names besides IP addresses that the browser may use;
	// any other name is refused, so that a web page rebinding its own name to
	// this address cannot read the state.
	hosts map[string]bool
	done  chan registerResult

	mu       sync.Mutex
	finished bool
}

func (r *registrar) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	if !r.hostAllowed(req.Host) {
		http.Error(w, "unexpected Host header", http.StatusForbidden)
		return
	}
	switch req.URL.Path {
	case "/":
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		writePage(w, http.StatusOK, formPage, map[string]any{"Name": r.name, "Action": r.action, "Manifest": r.manifest})
	case "/callback":
		r.callback(w, req)
	default:
		http.NotFound(w, req)
	}
}

func (r *registrar) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || r.hosts[strings.ToLower(host)]
}

func (r *registrar) callback(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(r.state)) != 1 {
		writePage(w, http.StatusBadRequest, messagePage, map[string]any{"Title": "Wrong state",
			"Text": "This answer does not belong to the registration started from " + r.page + ". Start again from that page."})
		return
	}
	code := q.Get("code")
	if code == "" {
		writePage(w, http.StatusBadRequest, messagePage, map[string]any{"Title": "No code",
			"Text": "GitHub sent no code back. Start again from " + r.page + "."})
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		writePage(w, http.StatusGone, messagePage, map[string]any{"Title": "Already done",
			"Text": "This registration is finished; see the terminal."})
		return
	}
	r.finished = true

	reg, err := r.complete(code)
	if err != nil {
		writePage(w, http.StatusBadGateway, messagePage, map[string]any{"Title": "Registration failed", "Text": err.Error()})
		r.done <- registerResult{err: err}
		return
	}
	r.printNextSteps(reg)
	files := []string{reg.PrivateKeyFile, reg.WebhookSecretFile}
	if reg.ClientSecretFile != "" {
		files = append(files, reg.ClientSecretFile)
	}
	writePage(w, http.StatusOK, donePage, map[string]any{"Reg": reg, "Files": files})
	r.done <- registerResult{reg: reg}
}

// complete exchanges the code for the App's credentials and saves them. It
// runs on Register's context, not the request's: a browser that goes away
// must not lose credentials GitHub hands out only once.
func (r *registrar) complete(code string) (*Registration, error) {
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	app, err := r.exchange(ctx, code)
	if err != nil {
		return nil, err
	}
	slug := app.Slug
	if !validSlug.MatchString(slug) {
		return nil, fmt.Errorf("GitHub answered with the slug %q, which is no file name", slug)
	}
	if app.ID == 0 || app.PEM == "" || app.WebhookSecret == "" {
		return nil, fmt.Errorf("App %s: GitHub's answer lacks its ID, private key or webhook secret", slug)
	}
	reg := &Registration{ID: app.ID, Slug: slug, Name: app.Name, HTMLURL: app.HTMLURL}
	if reg.HTMLURL != "" {
		reg.InstallURL = strings.TrimSuffix(reg.HTMLURL, "/") + "/installations/new"
	}
	files := appreg.CredentialFiles(r.outDir, slug)
	contents := []string{app.PEM, app.WebhookSecret, app.ClientSecret}
	if contents[2] == "" {
		files, contents = files[:2], contents[:2]
	}
	if err := appreg.SaveCredentials(r.outDir, files, contents); err != nil {
		return nil, fmt.Errorf("App %s (ID %d, %s) was created, but its credentials were not saved: %w; "+
			"generate a private key and set a new webhook secret in the App's settings", slug, reg.ID, reg.HTMLURL, err)
	}
	reg.PrivateKeyFile, reg.WebhookSecretFile = files[0], files[1]
	if len(files) > 2 {
		reg.ClientSecretFile = files[2]
	}
	return reg, nil
}

func (r *registrar) printNextSteps(reg *Registration) {
	fmt.Fprintf(r.out, "Registered the GitHub App %q, ID %d: %s\n", reg.Name, reg.ID, reg.HTMLURL)
	fmt.Fprintf(r.out, "\nIts credentials are in files readable only by you (never printed):\n")
	for _, f := range []string{reg.PrivateKeyFile, reg.WebhookSecretFile, reg.ClientSecretFile} {
		if f != "" {
			fmt.Fprintf(r.out, "  %s\n", f)
		}
	}
	fmt.Fprintf(r.out, "\nNext:\n1. Set in app.yml:\n\n   github:\n     appID: %d\n     privateKeyFile: %s\n     webhookSecretFile: %s\n\n",
		reg.ID, reg.PrivateKeyFile, reg.WebhookSecretFile)
	fmt.Fprintf(r.out, "2. Run driftback serve --config app.yml where GitHub can reach the webhook URL.\n")
	fmt.Fprintf(r.out, "3. Install the App on your GitOps repositories: %s\n", reg.InstallURL)
}

func writePage(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = t.Execute(w, data) // the browser gets what arrives; nothing to report it to
}

const pageStyle = `<style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}code{word-break:break-all}</style>`

var formPage = template.Must(template.New("form").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Register {{.Name}}</title>` + pageStyle + `</head>
<body>
<h1>Register the GitHub App {{.Name}}</h1>
<p>Sending the App's manifest to GitHub, where you confirm it. If nothing happens, press the button.</p>
<form id="manifest" method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Continue to GitHub</button>
</form>
<script>document.getElementById("manifest").submit();</script>
</body></html>
`))

var messagePage = template.Must(template.New("message").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>` + pageStyle + `</head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

var donePage = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Registered {{.Reg.Name}}</title>` + pageStyle + `</head>
<body>
<h1>Registered {{.Reg.Name}}</h1>
<p>App ID {{.Reg.ID}}. Its private key and secrets are saved, readable only by you, in:</p>
<ul>{{range .Files}}<li><code>{{.}}</code></li>{{end}}</ul>
<p>Next: set <code>github.appID</code>, <code>github.privateKeyFile</code> and <code>github.webhookSecretFile</code> in app.yml, as the terminal shows, then
<a href="{{.Reg.InstallURL}}">install the App</a> on your GitOps repositories. You can close this page.</p>
</body></html>
`))
