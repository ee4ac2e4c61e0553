package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"sandman/app/apptest"
)

// grantClipboard lets the tab's page read and write the clipboard, as a founder who allows it.
func grantClipboard(t *testing.T, tab *apptest.Tab, origin string) {
	t.Helper()
	tab.Do(t, chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{Permission: &browser.PermissionDescriptor{Name: name},
				Setting: browser.PermissionSettingGranted, Origin: origin, BrowserContextID: chromedp.FromContext(ctx).BrowserContextID}); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}))
}

// The API tokens page in Chromium, with JavaScript and without: a founder makes a token (shown
// once, with Copy, which copies it, and "You won't see it again"), sees it listed with its last
// use and never its secret again, and revokes it, after which it no longer works. axe-core finds
// nothing serious and nothing scrolls sideways at 390 px, in every state of the page.
func TestBrowserAPITokensPage(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("tokens-page@example.com")
	b, tab := s.Browse(t, "tokens-page@example.com")

	click(t, tab, "[data-testid=nav-tokens]")
	tab.WaitFor(t, "the tokens page", `!!document.querySelector("[data-testid=no-tokens]")`)
	checkForEveryone(t, tab, "tokens-empty", `!!document.querySelector("[data-testid=no-tokens]")`)
	tab.Do(t, chromedp.SendKeys(chromedp.ID("token-name"), "ci"), chromedp.Click(chromedp.CSS(`input[name=expiry][value="30"]`)),
		chromedp.Click(chromedp.CSS("[data-testid=make-token]")))
	tab.WaitFor(t, "the token made", `!!document.querySelector("[data-testid=token-made]")`)
	secret := apptest.Eval[string](t, tab, `document.querySelector("[data-testid=token-secret]").value`)
	if !strings.HasPrefix(secret, "sm_") || !strings.Contains(apptest.Eval[string](t, tab, `document.querySelector("[data-testid=token-made]").textContent`), "You won't see it again") {
		t.Fatalf("the made token shows %q", secret)
	}
	checkForEveryone(t, tab, "tokens-made", `!!document.querySelector("[data-testid=token-made]")`)
	grantClipboard(t, tab, s.URL())
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=copy-token]")))
	tab.WaitFor(t, "Copy says it copied", textIs("[data-testid=copy-token]", "Copied"))
	if got := apptest.Eval[string](t, tab, `navigator.clipboard.readText()`, chromedp.EvalAwaitPromise); got != secret {
		t.Fatalf("Copy copied %q, the token is %q", got, secret)
	}

	// The backend uses it; the page lists it with that use, and never shows the secret again.
	apptest.RequireStatus(t, c.WithToken(secret).API(http.MethodGet, "/api/projects", nil, nil), http.StatusOK)
	tab.Do(t, chromedp.Navigate(s.URL()+"/settings/tokens"))
	tab.WaitFor(t, "the list", `document.querySelectorAll("[data-testid=token]").length === 1`)
	if html := apptest.Eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(html, secret[3:]) {
		t.Fatal("the page shows the token's secret again")
	}
	if got := apptest.Eval[string](t, tab, `document.querySelector("[data-testid=token-last-use]").textContent`); !strings.Contains(got, "Last used") ||
		!strings.Contains(got, "127.0.0.1") {
		t.Fatalf("the token's last use reads %q", got)
	}
	checkForEveryone(t, tab, "tokens-list", `document.querySelectorAll("[data-testid=token]").length === 1`)
	click(t, tab, "[data-testid=revoke]")
	tab.WaitFor(t, "the revoke said", `!!document.querySelector("[data-testid=token-revoked]") && !!document.querySelector("[data-testid=no-tokens]")`)
	requireInvalidToken(t, "the revoked token", c.WithToken(secret).API(http.MethodGet, "/api/me", nil, nil))

	// Without JavaScript: the same forms; the token can be selected in its field, and Copy,
	// which needs a script, is not offered.
	nojs := b.OpenWithoutJavaScript(t, s.URL()+"/settings/tokens")
	nojs.WaitFor(t, "the tokens page", `!!document.querySelector("[data-testid=token-form]")`)
	nojs.Do(t, chromedp.SendKeys(chromedp.ID("token-name"), "staging"), chromedp.Click(chromedp.CSS(`input[name=expiry][value="never"]`)),
		chromedp.Click(chromedp.CSS("[data-testid=make-token]")))
	nojs.WaitFor(t, "the token made", `!!document.querySelector("[data-testid=token-made]")`)
	plain := apptest.Eval[string](t, nojs, `document.querySelector("[data-testid=token-secret]").value`)
	if apptest.Eval[string](t, nojs, `getComputedStyle(document.querySelector("[data-testid=copy-token]")).display`) != "none" {
		t.Error("Copy shows without JavaScript")
	}
	apptest.RequireStatus(t, c.WithToken(plain).API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	nojs.ScriptsBack(t) // for axe-core: the page stays as drawn without JavaScript
	checkForEveryone(t, nojs, "tokens-made-no-js", `!!document.querySelector("[data-testid=token-made]")`)
	nojs.Do(t, chromedp.Click(chromedp.CSS("[data-testid=revoke]")))
	nojs.WaitFor(t, "the revoke said", `!!document.querySelector("[data-testid=token-revoked]")`)
	requireInvalidToken(t, "the token revoked without JavaScript", c.WithToken(plain).API(http.MethodGet, "/api/me", nil, nil))

	// A form sent without a name is answered with the error next to the field.
	nojs.Do(t, chromedp.Click(chromedp.CSS("[data-testid=make-token]")))
	nojs.WaitFor(t, "the name's error", `!!document.querySelector("[data-testid=err-name]")`)
	checkForEveryone(t, nojs, "tokens-error-no-js", `!!document.querySelector("[data-testid=err-name]")`)
}
