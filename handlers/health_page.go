package handlers

import (
	"context"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/views"
)

// logsShown is how many of the newest lines the build page draws; its script follows the rest.
const logsShown = 200

// healthVM is the build page's Logs panel and Problems list: the newest lines, and each problem
// with its text for the builder's AI (the files its version changed read once per version).
func (h *Handlers) healthVM(ctx context.Context, owner, project uuid.UUID, now time.Time) (views.AppHealth, error) {
	out := views.AppHealth{ProjectID: project.String(), Now: now}
	lines, err := h.AppLog.Newest(ctx, owner, project, logsShown)
	if err != nil {
		return out, err
	}
	for _, l := range lines {
		out.Lines = append(out.Lines, views.LogLine{Seq: l.Seq, At: l.At, Version: l.Version, Source: string(l.Source),
			Stream: string(l.Stream), Text: l.Text})
	}
	problems, err := h.AppLog.Problems(ctx, owner, project)
	if err != nil {
		return out, err
	}
	changed := map[int32]applog.Changed{}
	for _, p := range problems {
		files, ok := changed[p.Version]
		if !ok {
			c, err := h.Versions.ChangedPaths(ctx, owner, project, p.Version)
			if err != nil && !apperrIsNotFound(err) { // a pruned version: no files to tell
				return out, err
			}
			files = applog.Changed{Added: c.Added, Changed: c.Changed, Removed: c.Removed}
			changed[p.Version] = files
		}
		out.Problems = append(out.Problems, views.ProblemRow{ID: p.ID.String(), Source: string(p.Source), Message: p.Message,
			Detail: p.Detail, Version: p.Version, Count: p.Count, LastSeen: p.LastSeen, Open: p.Open, AIText: applog.AIText(p, files)})
	}
	return out, nil
}
