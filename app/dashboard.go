package app

import (
	"context"
	"log/slog"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/report"
)

// dashboardEdited acts on the boxes a person ticked on a drift dashboard.
// A tick by someone with write permission is recorded as driftback's own
// comment on the dashboard, which the drift loop reads and acts on (the
// replica that watches the target's cluster, whichever received the
// event); a tick by anyone else is unticked again, with a note. Both are
// keyed by the edit, so a delivery received twice acts once.
func (a *App) dashboardEdited(ctx context.Context, ev *ghapp.IssueEvent, log *slog.Logger) error {
	gh, err := a.clients.Installation(ev.Installation)
	if err != nil {
		return err
	}
	bot, err := a.clients.BotLogin(ctx)
	if err != nil {
		return err
	}
	if ev.Sender == bot || ev.Author != bot || !ghapp.IsDashboard(ev.Body) || !a.cfg.Server.Dashboard() {
		return nil // driftback's own edit, not its dashboard, or the dashboard is off
	}
	ticks := report.NewlyTicked(*ev.BodyBefore, ev.Body)
	if len(ticks) == 0 {
		return nil
	}
	owner, name := ev.Repo.Owner, ev.Repo.Name
	ok, perm, err := gh.CanWrite(ctx, owner, name, ev.Sender)
	if err != nil {
		return err
	}
	if !ok {
		log.Info("dashboard tick refused: no write permission", "user", ev.Sender, "permission", perm, "ticks", len(ticks))
		d, err := gh.FindDashboard(ctx, owner, name, ev.Number)
		if err != nil {
			return err
		}
		if _, err := gh.WriteDashboard(ctx, owner, name, d, report.Untick(d.Body, ticks), nil); err != nil {
			return err
		}
		note, mark := report.DashboardRefused(ev.Sender, ev.UpdatedAt)
		_, err = gh.CommentOnce(ctx, owner, name, ev.Number, note, mark)
		return err
	}
	for _, t := range ticks {
		body, mark := report.DashboardRequest(t, ev.Sender, ev.UpdatedAt)
		made, err := gh.CommentOnce(ctx, owner, name, ev.Number, body, mark)
		if err != nil {
			return err
		}
		log.Info("dashboard request", "user", ev.Sender, "kind", t.Kind, "target", t.Target, "item", t.Item, "new", made)
	}
	if a.drift != nil {
		a.drift.DashboardEdited(ev.Repo.FullName)
	}
	return nil
}
