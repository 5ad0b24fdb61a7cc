// A fake OpenAI-style /v1/chat/completions behind floodgate's Express
// middleware. Each request reserves what it could cost (its prompt and its
// max_tokens) from its API key's token budget before the handler runs, and
// is settled at usage.total_tokens once the response has gone. A request
// whose estimate does not fit in what is left gets 429.
//
//   floodgate serve --config floodgate.yaml      # the `tokens` rule
//   npm install && npm start                     # 127.0.0.1:3000

const express = require('express');
const { createClient, floodgate, openAIUsage } = require('floodgate-client');

const fg = createClient({
  host: '127.0.0.1',
  port: Number(process.env.FLOODGATE_RESP_PORT || 6479),
});

// About four characters a token, as OpenAI's rule of thumb.
function promptTokens(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const chars = messages.reduce((n, m) => n + String(m?.content ?? '').length, 0);
  return Math.max(1, Math.ceil(chars / 4));
}

function maxTokens(body) {
  const n = Number(body?.max_tokens);
  return Number.isInteger(n) && n > 0 ? Math.min(n, 4096) : 256;
}

const app = express();
app.use(express.json({ limit: '1mb' }));

app.post(
  '/v1/chat/completions',
  floodgate({
    client: fg,
    rule: 'tokens',
    // The budget is the API key's; without one, the caller's address.
    key: (req) => req.get('authorization') ?? req.ip,
    reserve: {
      estimate: (req) => promptTokens(req.body) + maxTokens(req.body),
      settle: openAIUsage, // usage.total_tokens of the JSON sent; the estimate if none
      ttlMs: 120000,
    },
    logger: (error) => console.error(`floodgate: ${error.message}`),
  }),
  (req, res) => {
    // The "model": echoes the last message's words back, at most max_tokens of them.
    const messages = Array.isArray(req.body?.messages) ? req.body.messages : [];
    const words = String(messages.at(-1)?.content ?? '').split(/\s+/).filter(Boolean);
    const reply = words.reverse().slice(0, maxTokens(req.body));
    const prompt = promptTokens(req.body);
    res.json({
      id: `chatcmpl-${Date.now().toString(36)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: req.body?.model ?? 'fake-1',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: reply.join(' ') },
          finish_reason: reply.length < words.length ? 'length' : 'stop',
        },
      ],
      usage: { prompt_tokens: prompt, completion_tokens: reply.length, total_tokens: prompt + reply.length },
    });
  },
);

const port = Number(process.env.PORT || 3000);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
