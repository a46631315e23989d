#!/usr/bin/env python3
"""Which sliding window transformers' Gemma 4 drafter uses: the drafter restated in numpy (float64) from its
checkpoint and the goldens' shared K/V, each chain step fed transformers' own inputs_embeds, with a sliding layer
seeing the last W - 1, W, W + 1 or all keys of [0, p). Only W + 1 agrees (about 2e-5; the others are off by 2 to 39):
transformers' bidirectional sliding mask keeps |q - kv| <= W (README.md). numpy only.

usage: restate_drafter.py [GOLDEN_DIR]   (default: tests/data/drafter)
"""
import glob
import json
import os
import struct
import sys

import numpy as np


def load_st(path):
    """A safetensors file as numpy arrays (no safetensors package needed)."""
    with open(path,'rb') as f:
        n=struct.unpack('<Q',f.read(8))[0]; hdr=json.loads(f.read(n)); data=f.read()
    out={}
    for k,v in hdr.items():
        if k=='__metadata__': continue
        a,b=v['data_offsets']; dt={'F32':np.float32,'I64':np.int64,'I32':np.int32}[v['dtype']]
        out[k]=np.frombuffer(data[a:b],dt).reshape(v['shape'])
    return out
def rms(x,w,eps): 
    x=x.astype(np.float64); r=x/np.sqrt((x*x).mean(-1,keepdims=True)+eps)
    return r*w if w is not None else r
def drafter(W, cfg, inp, p, skv, window_keys):
    """One step at position p over the K/V of [0, p) (sliding layers: the last window_keys). (logits, state)."""
    tc=cfg['text_config']; eps=tc['rms_norm_eps']
    x=W['pre_projection.weight']@inp
    for i,lt in enumerate(tc['layer_types']):
        pre=f'model.layers.{i}.'
        hd=tc['per_layer_config'].get(str(i),{}).get('head_dim',tc['head_dim']) if tc.get('per_layer_config') else tc['head_dim']
        xn=rms(x,W[pre+'input_layernorm.weight'],eps)
        q=(W[pre+'self_attn.q_proj.weight']@xn).reshape(-1,hd)
        q=rms(q,W[pre+'self_attn.q_norm.weight'],eps)
        rp=tc['rope_parameters'][lt]
        inv=1.0/(rp['rope_theta']**(np.arange(0,hd,2)/hd))
        if rp.get('rope_type')=='proportional':
            inv[int(hd*rp.get('partial_rotary_factor',1.0))//2:]=0
        ang=p*inv; emb=np.concatenate([ang,ang]); cos,sin=np.cos(emb),np.sin(emb)
        half=hd//2; rot=np.concatenate([-q[:,half:],q[:,:half]],-1); q=q*cos+rot*sin
        K,V=skv[lt]; K,V=K[:,:p],V[:,:p]
        if lt=='sliding_attention': K,V=K[:,max(0,p-window_keys):],V[:,max(0,p-window_keys):]
        g=q.shape[0]//K.shape[0]; Kr=np.repeat(K,g,0); Vr=np.repeat(V,g,0)
        s=np.einsum('hd,hkd->hk',q,Kr); s=s-s.max(-1,keepdims=True); w=np.exp(s); w/=w.sum(-1,keepdims=True)
        o=np.einsum('hk,hkd->hd',w,Vr).reshape(-1)
        o=W[pre+'self_attn.o_proj.weight']@o
        x=x+rms(o,W[pre+'post_attention_layernorm.weight'],eps)
        f=rms(x,W[pre+'pre_feedforward_layernorm.weight'],eps)
        gt=W[pre+'mlp.gate_proj.weight']@f; gl=0.5*gt*(1+np.tanh(np.sqrt(2/np.pi)*(gt+0.044715*gt**3)))
        f=W[pre+'mlp.down_proj.weight']@(gl*(W[pre+'mlp.up_proj.weight']@f))
        x=x+rms(f,W[pre+'post_feedforward_layernorm.weight'],eps)
        x=x*W[pre+'layer_scalar'].reshape(-1)[0]
    hn=rms(x,W['model.norm.weight'],eps)
    E=W.get('lm_head.weight',W['model.embed_tokens.weight'])
    if cfg['use_ordered_embeddings']:
        c=W['masked_embedding.centroids.weight']@hn; k=cfg['centroid_intermediate_top_k']
        top=np.argsort(-c,kind='stable')[:k]; per=W['masked_embedding.token_ordering'].astype(np.int64).reshape(cfg['num_centroids'],-1)
        sel=per[top].reshape(-1); sl=E[sel]@hn; lg=np.full(E.shape[0],sl.min()-1.0); lg[sel]=sl
    else: lg=E@hn
    return lg, W['post_projection.weight']@hn

def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../tests/data/drafter")
    for d in sorted(glob.glob(os.path.join(root, "*__*"))):
        m = json.load(open(d + "/meta.json"))
        cfg = json.load(open(d + "/config.json"))
        W = load_st(d + "/model.safetensors")
        Wn = m["backbone_sliding_window"]
        skv = {}
        for t, sh in m["shared_kv"].items():
            skv[t] = tuple(np.fromfile(f"{d}/backbone_{t}_{x}.f32", np.float32).reshape(sh[f"{x}_shape"]).astype(np.float64)
                           for x in ("k", "v"))
        res = {}
        for label, wk in (("W-1", Wn - 1), ("W", Wn), ("W+1", Wn + 1), ("all", 10**9)):
            worst = 0.0
            for c in m["chains"]:
                p, n = c["p"], m["n_draft"]
                inp = np.fromfile(f"{d}/draft_in_p{p}.f32", np.float32).reshape(n, -1)
                lg = np.fromfile(f"{d}/draft_logits_p{p}.f32", np.float32).reshape(n, -1)
                hh = np.fromfile(f"{d}/draft_h_p{p}.f32", np.float32).reshape(n, -1)
                for k in range(n):
                    l2, h2 = drafter(W, cfg, inp[k].astype(np.float64), p, skv, wk)
                    worst = max(worst, np.abs(l2 - lg[k]).max(), np.abs(h2 - hh[k]).max())
            res[label] = float("%.3g" % worst)
        print(f"{os.path.basename(d):34s} W={Wn:2d} max |restated - transformers| (logits, state) by keys seen: {res}")


if __name__ == "__main__":
    main()
