/* dnsstub_answer.c - the answer side of the DNS stub (see dnsstub.h for the contract,
 * dnsstub_internal.h for what it shares with dnsstub.c): an upstream answer matched to its
 * pending query, each of its addresses admitted (the rebinding, CNAME-chain and intercepted-host
 * checks, then the nft sets) or refused and audited, and the answer rebuilt from what was
 * admitted sent to the client. Addresses reach nft as text made by inet_ntop from answer bytes -
 * never as text of the answer. Ordering: the sets are filled before the answer is sent, so the
 * container's first connect after resolving already passes. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/nft.h"
#include "policy/nft_ruleset.h"
#include "monitor/audit.h"
#include "monitor/dns_build.h"
#include "monitor/dns_parse.h"
#include "monitor/dns_rebind.h"
#include "monitor/dns_setlife.h"
#include "monitor/dns_upstream.h"
#include "monitor/dnsstub_internal.h"
#include "monitor/splice.h"

static const uint16_t default_ports[] = { 80, 443 };

/* the libnftables context in the container's namespace, made at first use; NULL when it
 * cannot be made (then nothing is added to the sets: fail closed) */
struct linux_nft *
dnsstub_nft (void *data)
{
  struct dnsstub *d = data;
  asbx_err_t e = NULL;
  if (!d->nft)
    d->nft = linux_nft_new (d->netns, &e);
  asbx_error_free (&e);
  return d->nft;
}

/* Run `cmd` (an `add element` transaction) in the container's namespace, making the
 * libnftables context first if this is the first one. Fail closed: an address that could not
 * be added is not in the answer's audit list and stays unreachable. */
static int
nft_set_allow (struct dnsstub *d, const char *cmd, asbx_err_t *err)
{
  if (!d->nft)
    d->nft = linux_nft_new (d->netns, err);
  if (!d->nft)
    return asbx_error_wrap (err, "network: DNS stub: nftables context");
  return linux_nft_run (d->nft, cmd, err);
}

/* splice_intercepted_fn: a new intercepted address goes into POLICY_NFT_ICPT4/6, which the
 * output chain refuses before the allowedCidrs ranges (policy/nft_ruleset.h). A failure is
 * audited: that address stays reachable through a range that holds it. */
void
dnsstub_icpt_set_add (void *data, int family, const unsigned char *addr)
{
  struct dnsstub *d = data;
  char text[INET6_ADDRSTRLEN];
  asbx_err_t e = NULL;
  inet_ntop (family, addr, text, sizeof text);
  cleanup_free char *cmd = xasprintf ("add element inet " POLICY_NFT_TABLE " %s { %s }\n",
                                      family == AF_INET ? POLICY_NFT_ICPT4 : POLICY_NFT_ICPT6, text);
  if (nft_set_allow (d, cmd, &e) == 0)
    return;
  struct audit_rec *r = audit_rec_new (d->id, "network");
  audit_rec_str (r, "addr", text);
  audit_rec_str (r, "decision", "error");
  audit_rec_str (r, "reason", e ? e->msg : "nftables");
  asbx_error_free (&e);
  if (audit_rec_write (r, d->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

/* one answer being rebuilt: what admit_addr let in */
struct admit_ctx
{
  struct dnsstub *d;
  const struct pending *p;
  char *addrs[64];
  size_t n;
  char *error;
  uint32_t min_ttl; /* the upstream's lowest TTL of the admitted records (the splice's names) */
  /* the answer's CNAME chain passes an intercepted name (the question's own included), or NULL;
   * `qint`: the question's name is intercepted itself */
  const char *via;
  bool qint;
};

/* dns_admit_fn: a refused address is one `dns` record {decision refused, addr, reason}; an
 * admitted one goes into the sets (before the answer is sent) unless its elements already live
 * long enough (monitor/dns_setlife.h: then *ttlp is lowered to their remaining life). Fail
 * closed: an address that could not be added is left out of the answer. */
static const char *
admit_addr (void *data, int family, const unsigned char *a, uint32_t *ttlp, bool in_chain)
{
  uint32_t ttl = *ttlp;
  struct admit_ctx *x = data;
  struct dnsstub *d = x->d;
  const struct policy_plan *pl = d->plan;
  char text[INET6_ADDRSTRLEN];
  inet_ntop (family, a, text, sizeof text);
  const char *why = !in_chain ? "not in the question's CNAME chain" : dns_rebind_refused (&d->rebind, family, a, text);
  const char *icpt = NULL; /* the intercepted host the refusal names */
  if (!why && x->via && !x->qint)
    {
      /* another name aliased to an intercepted one: the address carries that host's traffic,
       * which only the TLS relay may carry (under the intercepted name's SNI); it is noted as
       * intercepted, and left out of this name's answer, since a connection under this name
       * would be refused anyway (splice.h) */
      splice_addr_resolved (d->splice, x->via, text, ttl);
      icpt = x->via;
      why = "CNAME chain through an intercepted host";
    }
  else if (!why && !x->qint && (icpt = splice_addr_intercepted (d->splice, family, a)) != NULL)
    why = "an intercepted host's address"; /* domain fronting: the name may not share it */
  if (!why && x->n == ASBX_ARRAY_SIZE (x->addrs))
    why = "too many addresses";
  if (why)
    {
      if (pl->audit_events & POLICY_AUDIT_DNS)
        {
          asbx_err_t e = NULL;
          struct audit_rec *r = audit_rec_new (d->id, "dns");
          audit_rec_str (r, "host", x->p->name);
          audit_rec_int (r, "qtype", x->p->qtype);
          audit_rec_str (r, "decision", "refused");
          audit_rec_str (r, "rule", x->p->rule);
          audit_rec_str (r, "addr", text);
          audit_rec_str (r, "reason", why);
          if (icpt)
            audit_rec_str (r, "intercepted", icpt);
          if (audit_rec_write (r, d->audit_fd, &e) < 0)
            asbx_error_free (&e);
        }
      return why;
    }
  /* every check above ran for this answer; only the write of an element that outlives it is
   * left out (its end stays the earlier answer's) */
  uint64_t now = now_ns ();
  if (dns_setlife_decide (&d->setlife, family, a, now, ttlp))
    {
      const uint16_t *ports = pl->ports_len ? pl->ports : default_ports;
      size_t nports = pl->ports_len ? pl->ports_len : ASBX_ARRAY_SIZE (default_ports);
      cleanup_free char *cmd = policy_nft_allow_cmd (text, ports, nports, ttl);
      asbx_err_t e = NULL;
      if (!cmd || nft_set_allow (d, cmd, &e) < 0)
        {
          if (e && !x->error)
            x->error = xstrdup (e->msg);
          asbx_error_free (&e);
          return "nft";
        }
      dns_setlife_note (&d->setlife, family, a, now, ttl);
    }
  x->addrs[x->n++] = xstrdup (text);
  x->min_ttl = x->n == 1 || ttl < x->min_ttl ? ttl : x->min_ttl;
  return NULL;
}

/* a datagram on pending query p's socket: the answer when it comes from the upstream's address
 * and port and carries p's id and question; anything else is dropped and p waits on. The sets
 * are written (admit_addr) before the answer is sent; the stub's own bookkeeping (the splice's
 * names, the audit record, closing p's socket, the next query's socket) comes right after it,
 * in the same turn of the monitor's loop, so nothing the container does next is handled before
 * it. Returns false when no datagram could be read. */
bool
dnsstub_on_answer (struct dnsstub *d, struct pending *p)
{
  unsigned char m[MSG_MAX], out[MSG_MAX];
  char name[256];
  unsigned qtype;
  size_t qend;
  ssize_t n = dns_upstream_recv (&d->up, p->up_fd, m, sizeof m);

  if (n < 0)
    return false;
  if (n < 12)
    return true; /* not from our upstream */
  /* parse_question wants a query: look at a copy with QR cleared */
  m[2] &= 0x7f;
  int r = dns_parse_question (m, (size_t) n, name, sizeof name, &qtype, &qend);
  m[2] |= 0x80;
  if (r < 0 || p->up_id != dns_get16 (m) || p->qtype != qtype || strcmp (p->name, name) != 0)
    return true;
  /* the client's limit: its EDNS size, 512 without EDNS (RFC 1035 §4.2.1), or TCP */
  size_t lim = p->conn >= 0 ? sizeof out : p->edns ? (p->edns < sizeof out ? p->edns : sizeof out) : 512;
  struct admit_ctx x = { .d = d, .p = p };
  char chain[8][256];
  size_t nchain = dns_answer_chain (m, (size_t) n, p->qend, chain, ASBX_ARRAY_SIZE (chain));
  x.qint = splice_intercepts (d->splice, name);
  for (size_t j = 0; j < nchain && !x.via; j++)
    if (splice_intercepts (d->splice, chain[j]))
      x.via = chain[j];
  size_t len = dns_rebuild_answer (m, (size_t) n, p->q, p->qend, p->cq, p->qend - 12, p->rd, p->edns != 0, out, lim,
                                   admit_addr, &x);
  if (!len)
    return true; /* not an answer to our question: the real one may still come */
  out[0] = (unsigned char) (p->client_id >> 8), out[1] = (unsigned char) p->client_id;
  dnsstub_reply (d, p->stub_fd, p->conn, p->gen, &p->client, p->client_len, out, len);
  if (x.n)
    splice_name_resolved (d->splice, name, x.min_ttl); /* SNI/Host may name it while its sets live */
  for (size_t j = 0; j < x.n; j++)
    splice_addr_resolved (d->splice, name, x.addrs[j], x.min_ttl);
  /* an address that could not be added is audited; the container's connect to it fails */
  dnsstub_audit (d, name, qtype, "allowed", p->rule, x.addrs, x.n, x.error);
  for (size_t j = 0; j < x.n; j++)
    free (x.addrs[j]);
  free (x.error);
  dnsstub_pending_end (p);
  dns_upstream_refill (&d->up);
  return true;
}
