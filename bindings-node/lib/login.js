'use strict';
// Logging in on the ioredis connections this package opens from URLs without telling ioredis
// the password. ioredis sends AUTH as an ordinary command, and with `DEBUG=ioredis:*` it prints
// every command it writes with its arguments — the password included, on every reconnect. So
// the credentials never enter ioredis's options: its connector (the part that opens the
// socket) is replaced by one that opens it, sends AUTH itself, reads the one-line reply, and
// only then hands the logged-in socket to ioredis, which goes on as with a server that needs no
// password (SELECT, the ready check, subscriptions, reconnects through this connector again).
// The lean command connection (lib/wire.js) does its own AUTH too; neither logs anything.

const net = require('node:net');
const tls = require('node:tls');
const { AbstractConnector, ReplyError } = require('ioredis');
const { endpointOf } = require('./targets');

/** The reply Redis gives AUTH when no password is configured; ioredis ignores it too. */
const NO_PASSWORD_SET = /no password is set|without any password configured/;

/** RESP for one command of string arguments (handshakes only; the engine encodes its own). */
function command(...args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return s;
}

/**
 * An ioredis connector class that logs in as `username` (may be undefined: the default user)
 * with `password` before ioredis sees the socket. Where to connect (host, port, family, tls,
 * connectTimeout) comes from the options ioredis constructs it with, so a Cluster's node
 * connections use it too.
 */
function loginConnector(username, password) {
  const auth = command('AUTH', ...(username ? [username, password] : [password]));
  return class LoginConnector extends AbstractConnector {
    constructor(options) {
      super(options.disconnectTimeout);
      this.options = options;
    }

    connect() {
      const o = this.options;
      this.connecting = true;
      return new Promise((resolve, reject) => {
        // On the next tick, as ioredis's own connector does: disconnect() may come first.
        process.nextTick(() => {
          if (!this.connecting) {
            reject(new Error('Connection is closed.'));
            return;
          }
          const at = { host: o.host, port: o.port };
          if (o.family != null) at.family = o.family;
          const stream = o.tls ? tls.connect({ ...at, ...o.tls }) : net.createConnection(at);
          this.stream = stream;
          let reply = '';
          let timer;
          const done = (err) => {
            clearTimeout(timer);
            stream.removeListener('data', onData);
            stream.removeListener('error', onError);
            stream.removeListener('close', onClose);
            if (err === undefined) {
              resolve(stream);
            } else {
              this.firstError = err;
              stream.destroy();
              reject(err);
            }
          };
          const onError = (err) => done(err);
          const onClose = () => done(new Error('Connection is closed.'));
          const onData = (chunk) => {
            reply += chunk.toString('latin1');
            const eol = reply.indexOf('\r\n');
            if (eol < 0) return;
            const line = Buffer.from(reply.slice(0, eol), 'latin1').toString('utf8');
            // Nothing else arrives before ioredis writes its first command, so no byte is lost
            // between this listener and ioredis's own.
            if (line[0] === '-' && !NO_PASSWORD_SET.test(line)) done(new ReplyError(line.slice(1)));
            else if (line[0] === '+' || line[0] === '-') done();
            else done(new Error(`unexpected reply to AUTH ${JSON.stringify(line.slice(0, 40))}`));
          };
          stream.on('data', onData);
          stream.once('error', onError);
          stream.once('close', onClose);
          stream.once(o.tls ? 'secureConnect' : 'connect', () => stream.write(auth));
          if (o.connectTimeout) {
            timer = setTimeout(() => {
              const err = new Error('connect ETIMEDOUT');
              err.code = 'ETIMEDOUT';
              done(err);
            }, o.connectTimeout);
          }
        });
      });
    }
  };
}

/**
 * The caller's `redisOptions` `ro` for a connection to checked URL `url`, with the credentials
 * (the URL's, else `ro`'s) moved out of them into a login connector, and `tls` set for
 * rediss://. Where to connect is the caller's to add (a Cluster names each node itself). A
 * caller's own `Connector` is kept, and then ioredis logs in itself.
 */
function loginOptions(url, ro) {
  const { username, password, tls: secure } = endpointOf(url);
  const { username: roUser, password: roPass, ...options } = ro;
  const user = username ?? roUser;
  const pass = password ?? roPass;
  if (secure && !options.tls) options.tls = {};
  if (pass === undefined || pass === null || pass === '') return options;
  if (options.Connector) return { ...options, username: user, password: pass };
  options.Connector = loginConnector(user, pass);
  return options;
}

/** ioredis options for one server at checked URL `url` (not a Cluster): loginOptions() plus host, port and db. */
function serverOptions(url, ro) {
  const { host, port } = endpointOf(url);
  const options = { ...loginOptions(url, ro), host, port };
  const path = url.pathname.replace(/^\//, '');
  if (path !== '') options.db = Number(path);
  return options;
}

module.exports = { loginOptions, serverOptions, NO_PASSWORD_SET, command };
