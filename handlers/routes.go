package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"sandman/lifecycle"
	"sandman/static"
)

// routes is the one route table.
func (h *Handlers) routes(e *echo.Echo) {
	e.Use(middleware.Recover())
	e.Use(h.requestLog)
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection:         "0",
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		ReferrerPolicy:        "same-origin",
		ContentSecurityPolicy: h.contentSecurityPolicy(),
	}))
	if h.HSTS {
		e.Use(hsts)
	}
	// Browsers' own cross-origin signal (Sec-Fetch-Site/Origin), under the session token check.
	e.Use(echo.WrapMiddleware(http.NewCrossOriginProtection().Handler))
	// Every body within its route's limit before anything reads it (limits.go).
	e.Use(h.limitBody)

	e.GET("/healthz", h.healthz)
	e.GET("/readyz", h.readyz)
	if h.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(h.Metrics))
	}
	// Signed by the provider instead of a session: no cookies, no CSRF token.
	e.POST("/webhooks/e2b", h.webhook)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticHandler(static.Files))))

	// A share link's visitors (docs/api.md, "Share links"): no account and no session, so no
	// cookie is read or set and no CSRF token can exist. The token in the path is their only
	// authority, and it reaches one project's preview, which they may see, wake (free, a
	// resume: never a build or a credit) and keep awake, within the visitors' limits. A
	// cross-site page can make a browser do nothing here that the link itself does not allow,
	// and the browsers' own cross-origin signal above still refuses its POSTs.
	v := e.Group(shareLinkPrefix+":token", h.visitorLink)
	v.GET("", h.sharePage)
	v.POST("", h.shareWake)
	v.POST("/activity", h.shareActivity)
	v.GET("/events", h.shareEvents)

	s := e.Group("", echo.WrapMiddleware(h.Sessions.LoadAndSave), h.loadUser, h.csrf)
	s.GET("/login", h.loginPage)
	s.POST("/login", h.loginSubmit)
	s.GET("/signup", h.signupPage)
	s.POST("/signup", h.signupSubmit)
	s.POST("/logout", h.logoutSubmit)

	// The operator's console (docs/operations.md): operators only, and a page that does not
	// exist for anyone else, so the operator check comes before the session token's.
	o := e.Group(opsPrefix, echo.WrapMiddleware(h.Sessions.LoadAndSave), h.loadUser, h.requireOperator, h.csrf)
	o.GET("", h.opsPage)
	o.GET("/sandboxes/:id", h.opsSandbox(false))
	o.GET("/sandboxes/:id/kill", h.opsSandbox(true))
	o.POST("/sandboxes/:id/pause", h.opsAction((*lifecycle.Service).OperatorPause))
	o.POST("/sandboxes/:id/kill", h.opsAction((*lifecycle.Service).OperatorKill))

	app := s.Group("", h.requireUser)
	app.GET("/", h.dashboard)
	app.GET("/events", h.events)
	app.GET("/projects/new", h.newProjectPage)
	app.POST("/projects", h.createFromStarter)
	app.POST("/projects/upload", h.createFromUpload)
	app.GET("/projects/:id", h.projectPage)
	app.POST("/projects/:id/build", h.buildAction(false))
	app.GET("/projects/:id/rebuild", h.rebuildConfirm)
	app.POST("/projects/:id/rebuild", h.buildAction(true))
	app.POST("/projects/:id/share", h.shareAction(h.share))
	app.POST("/projects/:id/share/new", h.shareAction(h.renewShare))
	app.POST("/projects/:id/share/off", h.shareAction(h.Shares.TurnOff))
	app.POST("/sandboxes/:id/resume", h.sandboxAction(h.resume))
	app.POST("/sandboxes/:id/verify", h.sandboxAction(h.verify))
	app.POST("/sandboxes/:id/pause", h.sandboxAction(h.pause))
	app.POST("/sandboxes/:id/keep-awake", h.sandboxAction(h.activity))

	s.POST("/api/users", h.apiSignUp)
	s.POST("/api/session", h.apiLogIn)
	api := s.Group("/api", h.requireUser)
	api.DELETE("/session", h.apiLogOut)
	api.GET("/me", h.apiMe)
	api.GET("/projects", h.apiListProjects)
	api.POST("/projects", h.apiCreateProject)
	api.POST("/projects/:id/builds", h.apiBuild(false))
	api.POST("/projects/:id/rebuild", h.apiBuild(true))
	api.POST("/projects/:id/share", h.apiShare)
	api.DELETE("/projects/:id/share", h.apiUnshare)
	api.GET("/sandboxes/:id", h.apiGetSandbox)
	api.POST("/sandboxes/:id/pause", h.apiSandboxAction(http.StatusAccepted, h.pause))
	api.POST("/sandboxes/:id/resume", h.apiSandboxAction(http.StatusAccepted, h.resume))
	api.POST("/sandboxes/:id/verify", h.apiSandboxAction(http.StatusAccepted, h.verify))
	api.POST("/sandboxes/:id/activity", h.apiSandboxAction(http.StatusOK, h.activity))
	api.GET("/ops/summary", h.opsSummary, h.requireOperator)
}

// hsts tells browsers to reach Sandman over HTTPS only, on every answer (echo's Secure
// middleware sends it only when it sees TLS itself, which a proxy in front hides).
func hsts(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Strict-Transport-Security", "max-age=31536000")
		return next(c)
	}
}
