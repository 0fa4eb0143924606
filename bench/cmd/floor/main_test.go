package main

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// serve runs h on a loopback listener until the test ends; it returns the
// listener's address.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func post(t *testing.T, addr, body string) *fasthttp.Response {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + addr + "/webhook/bench?x=1")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	resp := &fasthttp.Response{}
	if err := fasthttp.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// floor-forward hands the request to the upstream and the upstream's
// status, content type and body back; floor-answer answers from memory.
func TestFloor(t *testing.T) {
	var got struct{ method, uri, ctype, body string }
	up := serve(t, func(ctx *fasthttp.RequestCtx) {
		got.method, got.uri = string(ctx.Method()), string(ctx.RequestURI())
		got.ctype, got.body = string(ctx.Request.Header.ContentType()), string(ctx.PostBody())
		ctx.SetStatusCode(fasthttp.StatusTeapot)
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("short and stout")
	})
	t.Run("forward", func(t *testing.T) {
		resp := post(t, serve(t, forwarder(up)), `{"id":"a"}`)
		if resp.StatusCode() != fasthttp.StatusTeapot || string(resp.Header.ContentType()) != "text/plain" || string(resp.Body()) != "short and stout" {
			t.Errorf("answer %d %q %q", resp.StatusCode(), resp.Header.ContentType(), resp.Body())
		}
		if got.method != "POST" || got.uri != "/webhook/bench?x=1" || got.ctype != "application/json" || got.body != `{"id":"a"}` {
			t.Errorf("upstream got %+v", got)
		}
	})
	t.Run("forward, upstream down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := ln.Addr().String()
		ln.Close()
		if resp := post(t, serve(t, forwarder(down)), "{}"); resp.StatusCode() != fasthttp.StatusBadGateway {
			t.Errorf("status %d, want 502", resp.StatusCode())
		}
	})
	t.Run("answer", func(t *testing.T) {
		resp := post(t, serve(t, answer), `{"id":"a"}`)
		if resp.StatusCode() != 200 || string(resp.Header.ContentType()) != "application/json" || string(resp.Body()) != string(answerBody) {
			t.Errorf("answer %d %q %q", resp.StatusCode(), resp.Header.ContentType(), resp.Body())
		}
	})
}

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:80", true}, {"[::1]:80", true}, {"10.0.0.1:80", false}, {"localhost:80", false}, {"127.0.0.1", false}} {
		t.Run(tc.addr, func(t *testing.T) {
			if err := loopback(tc.addr); (err == nil) != tc.ok {
				t.Errorf("loopback(%q) = %v", tc.addr, err)
			}
		})
	}
}
