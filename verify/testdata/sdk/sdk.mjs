// sdk.mjs runs the providers' own SDK code for verify/sdk_test.go.
//
// The test copies this file next to the node_modules that `npm ci`
// installed from package-lock.json and starts it with node. It loads every
// SDK, prints one line {"ready":true,"versions":{...},"load_errors":{...}},
// then answers requests, one JSON object a line on stdin, one a line on
// stdout, in order:
//
//	{"id":1,"provider":"stripe","op":"sign","secret":"whsec_...","body":"...","timestamp":"1767225600"}
//	-> {"id":1,"headers":{"Stripe-Signature":"t=...,v1=..."}}
//	{"id":2,"provider":"stripe","op":"verify","secret":"...","body":"...","headers":{...}}
//	-> {"id":2,"valid":true} or {"id":2,"valid":false,"detail":"why the SDK refused"}
//
// Request fields: provider, op (sign or verify), secret (the shared secret,
// or the public key: hex for Discord, base64 DER for SendGrid, PEM for
// Google), body, headers (verify: the delivery's headers, names as sent),
// timestamp (sign: unix seconds, or milliseconds for HubSpot), url (the URL
// the provider calls), msg_id (sign, Svix: the message id), audience and
// key_id (Google), algorithm (Twilio: what sign signs with, HMAC_SHA1 when
// empty; verify reads it from X-Twilio-Webhooks-Signature-Settings unless
// given). A request the SDK cannot serve gets
// {"id":N,"error":"..."}. Anything the SDKs log goes to stderr.
import { createRequire } from 'node:module';
import { format } from 'node:util';
import querystring from 'node:querystring';
import readline from 'node:readline';

const require = createRequire(import.meta.url);

// Keep stdout for the protocol: the SDKs' own logging goes to stderr.
for (const k of ['log', 'info', 'debug', 'warn', 'error', 'trace']) {
  console[k] = (...args) => process.stderr.write(format(...args) + '\n');
}

// The packages, as package.json lists them.
const packages = Object.keys(require('./package.json').dependencies);

const sdk = {};
const loadErrors = {};
async function load(name, fn) {
  try {
    sdk[name] = await fn();
  } catch (e) {
    loadErrors[name] = String(e && e.stack ? e.stack : e);
  }
}

await load('stripe', () => {
  const Stripe = require('stripe');
  return new Stripe('sk_test_clawgate_sdk_check');
});
await load('octokit', () => import('@octokit/webhooks-methods'));
await load('svix', () => require('svix'));
await load('clerk', () => import('@clerk/backend/webhooks'));
await load('resend', () => {
  const { Resend } = require('resend');
  return new Resend('re_clawgate_sdk_check');
});
await load('paddle', () => {
  const { Paddle } = require('@paddle/paddle-node-sdk');
  return new Paddle('pdl_sdbx_apikey_clawgate_sdk_check');
});
await load('discord', () => require('discord-interactions'));
await load('linear', () => import('@linear/sdk/webhooks'));
await load('hubspot', () => require('@hubspot/api-client'));
await load('twilio', () => require('twilio'));
await load('square', () => require('square'));
await load('sendgrid', () => require('@sendgrid/eventwebhook'));
await load('razorpay', () => require('razorpay'));
await load('coinbase', () => require('coinbase-commerce-node'));
await load('shopify', () => {
  require('@shopify/shopify-api/adapters/node');
  const { shopifyApi, ApiVersion, LogSeverity } = require('@shopify/shopify-api');
  return { shopifyApi, ApiVersion, LogSeverity };
});
await load('slack', () => require('@slack/bolt'));
await load('zoom', () => import('@zoom/rivet/meetings'));
await load('google', () => require('google-auth-library'));

function installedVersions() {
  const out = {};
  for (const p of packages) {
    try {
      out[p] = require(`./node_modules/${p}/package.json`).version;
    } catch (e) {
      out[p] = '';
    }
  }
  return out;
}

// header returns the value of the header named name, in any case.
function header(headers, name) {
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers || {})) {
    if (k.toLowerCase() === want) return v;
  }
  return undefined;
}

// form parses a form body as a web framework hands it to the SDK
// (express.urlencoded({extended: false}), Node's querystring): a name
// sent several times has an array of values.
function form(body) {
  return { ...querystring.parse(body) };
}

// Each provider: sign(req) returns the headers the provider would send;
// verify(req) returns true, or false or throws when the SDK refuses.
const providers = {
  github: {
    sign: async (r) => ({ 'X-Hub-Signature-256': await sdk.octokit.sign(r.secret, r.body) }),
    verify: (r) => sdk.octokit.verify(r.secret, r.body, header(r.headers, 'X-Hub-Signature-256')),
  },
  stripe: {
    sign: (r) => ({
      'Stripe-Signature': sdk.stripe.webhooks.generateTestHeaderString({
        payload: r.body, secret: r.secret, timestamp: Number(r.timestamp),
      }),
    }),
    verify: (r) => {
      sdk.stripe.webhooks.constructEvent(r.body, header(r.headers, 'Stripe-Signature'), r.secret);
      return true;
    },
  },
  clerk: {
    sign: (r) => svixSign(r),
    verify: async (r) => {
      const req = new Request('https://gateway.example.com/hooks/clerk', {
        method: 'POST', headers: r.headers, body: r.body,
      });
      await sdk.clerk.verifyWebhook(req, { signingSecret: r.secret });
      return true;
    },
  },
  resend: {
    sign: (r) => svixSign(r),
    verify: (r) => {
      sdk.resend.webhooks.verify({
        payload: r.body,
        headers: {
          id: header(r.headers, 'svix-id'),
          timestamp: header(r.headers, 'svix-timestamp'),
          signature: header(r.headers, 'svix-signature'),
        },
        webhookSecret: r.secret,
      });
      return true;
    },
  },
  paddle: {
    // unmarshal runs the same check, then builds the SDK's event object
    // from the body, which needs a complete event.
    verify: (r) => sdk.paddle.webhooks.isSignatureValid(r.body, r.secret, header(r.headers, 'Paddle-Signature')),
  },
  discord: {
    verify: (r) => sdk.discord.verifyKey(r.body, header(r.headers, 'X-Signature-Ed25519'),
      header(r.headers, 'X-Signature-Timestamp'), r.secret),
  },
  linear: {
    verify: (r) => new sdk.linear.LinearWebhookClient(r.secret)
      .verify(Buffer.from(r.body), header(r.headers, 'Linear-Signature')),
  },
  hubspot: {
    sign: (r) => ({
      'X-HubSpot-Signature-v3': sdk.hubspot.Signature.getSignature('POST', 'v3', {
        clientSecret: r.secret, requestBody: r.body, url: r.url, timestamp: r.timestamp,
      }),
      'X-HubSpot-Request-Timestamp': r.timestamp,
    }),
    verify: (r) => sdk.hubspot.Signature.isValid({
      signatureVersion: 'v3',
      method: 'POST',
      signature: header(r.headers, 'X-HubSpot-Signature-v3'),
      clientSecret: r.secret,
      requestBody: r.body,
      url: r.url,
      timestamp: Number(header(r.headers, 'X-HubSpot-Request-Timestamp')),
    }),
  },
  twilio: {
    sign: (r) => ({
      'X-Twilio-Signature': sdk.twilio.getExpectedTwilioSignature(r.secret, r.url, form(r.body), r.algorithm),
      // A SharedKey webhook names its algorithm.
      ...(r.algorithm ? { 'X-Twilio-Webhooks-Signature-Settings': `key=webhooks_sharedkey_clawgate,algorithm=${r.algorithm}` } : {}),
    }),
    // The algorithm is read from X-Twilio-Webhooks-Signature-Settings, as
    // twilio.webhook() does (HMAC_SHA1 without it), unless given.
    verify: (r) => sdk.twilio.validateRequest(r.secret, header(r.headers, 'X-Twilio-Signature'),
      r.url, form(r.body),
      r.algorithm || sdk.twilio.getSignatureAlgorithm(header(r.headers, 'X-Twilio-Webhooks-Signature-Settings'))),
  },
  square: {
    verify: (r) => sdk.square.WebhooksHelper.verifySignature({
      requestBody: r.body,
      signatureHeader: header(r.headers, 'X-Square-Hmacsha256-Signature'),
      signatureKey: r.secret,
      notificationUrl: r.url,
    }),
  },
  sendgrid: {
    verify: (r) => {
      const ew = new sdk.sendgrid.EventWebhook();
      return ew.verifySignature(ew.convertPublicKeyToECDSA(r.secret), r.body,
        header(r.headers, 'X-Twilio-Email-Event-Webhook-Signature'),
        header(r.headers, 'X-Twilio-Email-Event-Webhook-Timestamp'));
    },
  },
  razorpay: {
    verify: (r) => sdk.razorpay.validateWebhookSignature(r.body, header(r.headers, 'X-Razorpay-Signature'), r.secret),
  },
  'coinbase-commerce': {
    sign: (r) => ({ 'X-CC-Webhook-Signature': sdk.coinbase.Webhook.computeSignature(r.body, r.secret) }),
    verify: (r) => sdk.coinbase.Webhook.verifySigHeader(r.body, header(r.headers, 'X-CC-Webhook-Signature'), r.secret),
  },
  shopify: {
    verify: async (r) => {
      const s = sdk.shopify;
      const api = s.shopifyApi({
        apiKey: 'clawgate-sdk-check',
        apiSecretKey: r.secret,
        scopes: [],
        hostName: 'gateway.example.com',
        apiVersion: s.ApiVersion.October25,
        isEmbeddedApp: false,
        logger: { level: s.LogSeverity.Error, log: () => {} },
      });
      // The headers Shopify sends beside the HMAC, which validate requires.
      const headers = {
        'X-Shopify-Topic': 'orders/updated',
        'X-Shopify-Shop-Domain': 'example.myshopify.com',
        'X-Shopify-API-Version': s.ApiVersion.October25,
        'X-Shopify-Webhook-Id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043',
        ...r.headers,
      };
      const res = await api.webhooks.validate({
        rawBody: r.body,
        rawRequest: { method: 'POST', url: '/hooks/shopify', headers },
        rawResponse: {},
      });
      if (!res.valid) throw new Error(`invalid: ${res.reason}`);
      return true;
    },
  },
  slack: {
    verify: (r) => {
      sdk.slack.verifySlackRequest({
        signingSecret: r.secret,
        body: r.body,
        headers: {
          'x-slack-signature': header(r.headers, 'X-Slack-Signature'),
          'x-slack-request-timestamp': Number(header(r.headers, 'X-Slack-Request-Timestamp')),
        },
      });
      return true;
    },
  },
  zoom: {
    verify: async (r) => {
      const receiver = new sdk.zoom.AwsLambdaReceiver({ webhooksSecretToken: r.secret });
      receiver.init({ eventEmitter: { emit: async () => {} } });
      const res = await receiver.start()({ body: r.body, headers: r.headers, isBase64Encoded: false }, {});
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${res.body}`);
      return true;
    },
  },
  'google-pubsub': {
    verify: async (r) => {
      const token = String(header(r.headers, 'Authorization') || '').replace(/^Bearer /, '');
      const client = new sdk.google.OAuth2Client();
      await client.verifySignedJwtWithCertsAsync(token, { [r.key_id]: r.secret }, r.audience,
        ['accounts.google.com', 'https://accounts.google.com']);
      return true;
    },
  },
};

// The SDK each provider needs loaded.
const needs = {
  github: ['octokit'], stripe: ['stripe'], clerk: ['svix', 'clerk'], resend: ['svix', 'resend'],
  paddle: ['paddle'], discord: ['discord'], linear: ['linear'], hubspot: ['hubspot'],
  twilio: ['twilio'], square: ['square'], sendgrid: ['sendgrid'], razorpay: ['razorpay'],
  'coinbase-commerce': ['coinbase'], shopify: ['shopify'], slack: ['slack'], zoom: ['zoom'],
  'google-pubsub': ['google'],
};

// svixSign signs as Svix sends for Clerk and Resend: svix-* headers.
function svixSign(r) {
  const sig = new sdk.svix.Webhook(r.secret).sign(r.msg_id, new Date(Number(r.timestamp) * 1000), r.body);
  return { 'svix-id': r.msg_id, 'svix-timestamp': r.timestamp, 'svix-signature': sig };
}

async function handle(r) {
  const p = providers[r.provider];
  if (!p) return { error: `no SDK for provider ${r.provider}` };
  for (const n of needs[r.provider]) {
    if (loadErrors[n]) return { error: `${n} did not load: ${loadErrors[n]}` };
  }
  const fn = p[r.op];
  if (!fn) return { error: `the ${r.provider} SDK cannot ${r.op}` };
  if (r.op === 'sign') return { headers: await fn(r) };
  try {
    const ok = await fn(r);
    return ok === true ? { valid: true } : { valid: false, detail: `returned ${JSON.stringify(ok)}` };
  } catch (e) {
    return { valid: false, detail: String(e && e.message ? e.message : e).slice(0, 300) };
  }
}

process.stdout.write(JSON.stringify({ ready: true, versions: installedVersions(), load_errors: loadErrors }) + '\n');

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let r;
  let out;
  try {
    r = JSON.parse(line);
    out = await handle(r);
  } catch (e) {
    out = { error: String(e && e.stack ? e.stack : e) };
  }
  process.stdout.write(JSON.stringify({ id: r ? r.id : 0, ...out }) + '\n');
}
