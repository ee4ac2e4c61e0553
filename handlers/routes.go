package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"sandman/db"
	"sandman/static"
)

// routes is the one route table. Each group declares its policy here: how its requests are
// authenticated, and how its answers (errors included) are written (answerAs). Every route's body
// is bounded by its rule (limits.go) once its answer's kind is known, so a refused body is
// answered as its route answers: a form's or a JSON body's default, or the rule a route declares
// with withBody, which reads a large body only once its group has authenticated the request.
func (h *Handlers) routes(e *echo.Echo) {
	e.Pre(withRequestState)
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

	e.GET("/healthz", h.healthz, h.limitBody)
	e.GET("/readyz", h.readyz, h.limitBody)
	if h.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(h.Metrics), h.limitBody)
	}
	// Signed by the provider instead of a session: no cookies, no CSRF token.
	h.withBody(e, "/webhooks/e2b", h.webhook, webhookRule, answerAs(answerJSON), h.limitBody)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticHandler(static.Files))), h.limitBody)

	// A share link's visitors (docs/api.md, "Share links"): no account and no session, so no
	// cookie is read or set and no CSRF token can exist. The token in the path is their only
	// authority, and it reaches one project's preview, which they may see, wake (free, a
	// resume: never a build or a credit) and keep awake, within the visitors' limits. A
	// cross-site page can make a browser do nothing here that the link itself does not allow,
	// and the browsers' own cross-origin signal above still refuses its POSTs.
	v := e.Group(shareLinkPrefix+":token", answerAs(answerShare), h.limitBody, h.visitorLink)
	v.GET("", h.sharePage)
	v.POST("", h.shareWake)
	v.POST("/activity", h.shareActivity)
	v.GET("/events", h.shareEvents)
	// The visitor's page relays the errors its preview's page reports (docs/architecture.md,
	// "The app's health").
	h.withBody(v, "/reports", h.shareReport, reportRule)

	// Pages and htmx actions: the browser's session and its CSRF token. An API token opens none
	// of them (its header is not read here).
	s := e.Group("", h.limitBody, h.session, h.csrf)
	s.GET("/login", h.loginPage)
	s.POST("/login", h.loginSubmit)
	s.GET("/signup", h.signupPage)
	s.POST("/signup", h.signupSubmit)
	s.POST("/logout", h.logoutSubmit)
	// The founder's event stream: refused (401), not sent to the log-in page, without a session.
	s.GET("/events", h.events, requirePrincipal)

	// The operator's console (docs/operations.md): operators only, and a page that does not
	// exist for anyone else, so the operator check comes before the session token's.
	o := e.Group(opsPrefix, h.limitBody, h.session, h.requireOperator, h.csrf)
	o.GET("", h.opsPage)
	o.GET("/sandboxes/:id", h.opsSandbox(false))
	o.GET("/sandboxes/:id/kill", h.opsSandbox(true))
	o.POST("/sandboxes/:id/pause", h.opsAction(db.OperatorActionPause))
	o.POST("/sandboxes/:id/kill", h.opsAction(db.OperatorActionKill))

	// The dashboard reads the founder's balance with its projects, in one round trip
	// (lifecycle.Projects): the pages' chain, with ownBalance telling the session not to read
	// it first. (On e, not in a group of its own, whose catch-all would replace the pages'.)
	e.GET("/", h.dashboard, h.limitBody, ownBalance, h.session, h.csrf, requireUser)
	app := s.Group("", requireUser)
	app.GET("/projects/new", h.newProjectPage)
	app.POST("/projects", h.createFromStarter)
	h.withBody(app, "/projects/upload", h.createFromUpload, uploadRule)
	app.GET("/projects/:id", h.projectPage)
	app.POST("/projects/:id/build", h.buildAction(false))
	app.GET("/projects/:id/rebuild", h.rebuildConfirm)
	app.POST("/projects/:id/rebuild", h.buildAction(true))
	app.POST("/projects/:id/share", h.shareAction(h.share))
	app.POST("/projects/:id/share/new", h.shareAction(h.renewShare))
	app.POST("/projects/:id/share/off", h.shareAction(h.Shares.TurnOff))
	app.POST("/projects/:id/settings", h.reloadAction)
	app.POST("/projects/:id/settings/reporter", h.reporterAction)
	app.POST("/projects/:id/env", h.envAddSubmit)
	app.POST("/projects/:id/env/:name", h.envReplaceSubmit)
	app.POST("/projects/:id/env/:name/delete", h.envDeleteSubmit)
	app.GET("/projects/:id/versions/new", h.uploadVersionPage)
	h.withBody(app, "/projects/:id/versions", h.uploadVersion, uploadVersionRule)
	app.GET("/projects/:id/versions/:n", h.versionPage)
	app.POST("/projects/:id/versions/:n/restore", h.restoreAction)
	app.POST("/sandboxes/:id/resume", h.sandboxAction(h.resume))
	app.POST("/sandboxes/:id/verify", h.sandboxAction(h.verify))
	app.POST("/sandboxes/:id/pause", h.sandboxAction(h.pause))
	app.POST("/sandboxes/:id/keep-awake", h.sandboxAction(h.activity))
	app.GET("/settings/tokens", h.tokensPage)
	app.POST("/settings/tokens", h.createTokenSubmit)
	app.POST("/settings/tokens/:id/revoke", h.revokeTokenSubmit)
	app.GET("/settings/webhooks", h.webhooksPage)
	app.POST("/settings/webhooks", h.createEndpointSubmit)
	app.POST("/settings/webhooks/:id/test", h.endpointAction("test", h.testEndpoint))
	app.POST("/settings/webhooks/:id/rotate", h.rotateEndpointSubmit)
	app.POST("/settings/webhooks/:id/enabled", h.endpointAction("enabled", h.enableEndpoint))
	app.POST("/settings/webhooks/:id/delete", h.endpointAction("deleted", h.deleteEndpoint))
	app.POST("/settings/webhooks/:id/deliveries/:delivery/retry", h.endpointAction("retried", h.retryDeliveryOf))

	// The JSON API: JSON answers, errors included.
	jsonAPI := e.Group("/api", answerAs(answerJSON), h.limitBody)
	// Before a session exists: the JSON sign-up and log-in need no CSRF token as JSON.
	signIn := jsonAPI.Group("", sessionOnly, h.session, h.csrfUnlessJSON)
	signIn.POST("/users", h.apiSignUp)
	signIn.POST("/session", h.apiLogIn)
	// A browser's session only, never an API token: a leaked token cannot mint more tokens.
	own := jsonAPI.Group("", sessionOnly, h.session, h.csrf, requirePrincipal)
	own.DELETE("/session", h.apiLogOut)
	own.POST("/tokens", h.apiCreateToken)
	own.GET("/tokens", h.apiListTokens)
	own.DELETE("/tokens/:id", h.apiRevokeToken)
	// The operator's console's figures: authenticated as the API's routes below (a session and
	// its CSRF token, or an API token), for operators only: to anyone else, anonymous included,
	// a route that does not exist (requireOperator instead of requirePrincipal's 401).
	opsAPI := jsonAPI.Group(opsPrefix, h.sessionOrToken, h.requireOperator)
	opsAPI.GET("/summary", h.opsSummary)
	// Everything else, and every route added to the API from now on: a browser's session and
	// its CSRF token, or an API token. (Registered last, this group also answers the API's
	// unknown routes.)
	api := jsonAPI.Group("", h.sessionOrToken, requirePrincipal)
	api.GET("/me", h.apiMe)
	api.GET("/projects", h.apiListProjects)
	api.PATCH("/projects/:id", h.apiPatchProject)
	api.POST("/projects", h.apiCreateProject)
	api.POST("/projects/:id/builds", h.apiBuild(false))
	api.POST("/projects/:id/rebuild", h.apiBuild(true))
	api.POST("/projects/:id/share", h.apiShare)
	api.DELETE("/projects/:id/share", h.apiUnshare)
	h.withBody(api, "/projects/:id/versions", h.apiCreateVersion, apiVersionRule)
	api.GET("/projects/:id/versions", h.apiListVersions)
	api.GET("/projects/:id/versions/:n", h.apiGetVersion)
	api.GET("/projects/:id/versions/:n/files/*", h.versionFile)
	api.GET("/projects/:id/versions/:n/archive", h.versionArchive)
	api.POST("/projects/:id/versions/:n/restore", h.apiRestoreVersion)
	api.GET("/projects/:id/logs", h.apiLogs)
	// The one event stream an API token may open: the founder's backend follows its app's output.
	api.GET("/projects/:id/logs/stream", h.apiLogStream)
	api.GET("/projects/:id/problems", h.apiProblems)
	api.GET("/projects/:id/env", h.apiListEnv)
	api.PUT("/projects/:id/env", h.apiPutEnv)
	api.PUT("/projects/:id/env/:name", h.apiPutEnvVar)
	api.DELETE("/projects/:id/env/:name", h.apiDeleteEnvVar)
	api.GET("/sandboxes/:id", h.apiGetSandbox)
	h.withBody(api, "/sandboxes/:id/reports", h.apiReport, reportRule)
	api.POST("/sandboxes/:id/pause", h.apiSandboxAction(http.StatusAccepted, h.pause))
	api.POST("/sandboxes/:id/resume", h.apiSandboxAction(http.StatusAccepted, h.resume))
	api.POST("/sandboxes/:id/verify", h.apiSandboxAction(http.StatusAccepted, h.verify))
	api.POST("/sandboxes/:id/activity", h.apiSandboxAction(http.StatusOK, h.activity))
	// The founder's outgoing webhooks and event feed (handlers/outbox.go).
	api.POST("/webhooks", h.apiCreateEndpoint)
	api.GET("/webhooks", h.apiListEndpoints)
	api.GET("/webhooks/:id", h.apiGetEndpoint)
	api.PATCH("/webhooks/:id", h.apiPatchEndpoint)
	api.DELETE("/webhooks/:id", h.apiDeleteEndpoint)
	api.POST("/webhooks/:id/rotate-secret", h.apiRotateSecret)
	api.POST("/webhooks/:id/test", h.apiTestEndpoint)
	api.GET("/webhooks/:id/deliveries", h.apiDeliveries)
	api.POST("/webhooks/:id/deliveries/:delivery/retry", h.apiRetryDelivery)
	api.GET("/events", h.apiEvents)
}

// answers is how a route's answers are written, its errors included: a property of its group.
type answers int

const (
	answerPage  answers = iota // a page, or for htmx a fragment (the default)
	answerJSON                 // the JSON API's and the webhook's
	answerShare                // a share link visitor's page
)

// answerAs declares how the routes it guards answer.
func answerAs(a answers) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			stateOf(c).answers = a
			return next(c)
		}
	}
}

// answersOf is how the request's route answers: a page for a request no group took. (Each
// group also answers its unknown paths and methods: echo routes them to the group's catch-all.)
func answersOf(c echo.Context) answers {
	return stateOf(c).answers
}

// hsts tells browsers to reach Sandman over HTTPS only, on every answer (echo's Secure
// middleware sends it only when it sees TLS itself, which a proxy in front hides).
func hsts(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Strict-Transport-Security", "max-age=31536000")
		return next(c)
	}
}
