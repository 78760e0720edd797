"""AIAK's image layout, copied from AIAK-Training's public history for the tests.

Source: baidu-baige/LoongForge, commit 0b5cc7b8 (2025-10-31, the first AIAK-Training-Omni commit,
same layout as AIAK-Training-LLM): every LLM launcher ``examples/<family>/{pretrain,finetuning}/*.sh``
(without the _128k variants) with the TP, PP, EP, --seq-length, --global-batch-size and
--micro-batch-size it sets, whether it saves (an uncommented --save) and whether it has
--is-tokenized-data (commented or not), every converter config
``tools/convert_checkpoint/config/<name>.json``, and preprocess_sft_data.py's --chat-template choices.
The tests check aiak-gen's shipped table against these, independently of the table itself.
"""

LAUNCHERS_TEXT = """\
baichuan2/finetuning/sft_baichuan2_13b.sh 1 2 1 4096 128 1 1 1
baichuan2/finetuning/sft_baichuan2_7b.sh 1 1 1 4096 128 1 1 1
baichuan2/pretrain/pretrain_baichuan2_13b.sh 1 2 1 4096 1024 1 1 0
baichuan2/pretrain/pretrain_baichuan2_7b.sh 1 1 1 4096 1024 1 1 0
llama2/finetuning/sft_llama2_13b.sh 1 2 1 4096 128 1 1 1
llama2/finetuning/sft_llama2_70b.sh 4 4 1 4096 128 1 1 1
llama2/finetuning/sft_llama2_7b.sh 1 1 1 4096 128 1 1 1
llama2/pretrain/pretrain_llama2_13b.sh 1 2 1 4096 1024 1 1 0
llama2/pretrain/pretrain_llama2_70b.sh 4 4 1 4096 1024 1 1 0
llama2/pretrain/pretrain_llama2_7b.sh 1 1 1 4096 1024 1 1 0
llama3.1/finetuning/sft_llama3.1_405b.sh 8 16 1 4096 128 1 1 1
llama3.1/finetuning/sft_llama3.1_70b.sh 4 4 1 4096 128 1 1 1
llama3.1/finetuning/sft_llama3.1_8b.sh 1 1 1 4096 128 1 1 1
llama3.1/pretrain/pretrain_llama3.1_405b.sh 8 16 1 8192 1024 1 1 0
llama3.1/pretrain/pretrain_llama3.1_70b.sh 4 4 1 4096 1024 1 1 0
llama3.1/pretrain/pretrain_llama3.1_8b.sh 1 1 1 4096 1024 1 1 0
llama3/finetuning/sft_llama3_70b.sh 4 4 1 4096 128 1 1 1
llama3/finetuning/sft_llama3_8b.sh 1 1 1 4096 128 1 1 1
llama3/pretrain/pretrain_llama3_70b.sh 4 4 1 4096 1024 1 1 0
llama3/pretrain/pretrain_llama3_8b.sh 1 1 1 4096 1024 1 1 0
mixtral/finetuning/sft_mixtral_8x22b.sh 2 2 8 2048 128 1 1 1
mixtral/finetuning/sft_mixtral_8x7b.sh 1 2 8 2048 128 1 1 1
mixtral/pretrain/pretrain_mixtral_8x22b.sh 2 2 8 1024 2048 1 1 0
mixtral/pretrain/pretrain_mixtral_8x7b.sh 1 2 8 2048 2048 1 1 0
qwen/finetuning/sft_qwen_1.8b.sh 1 1 1 2048 128 1 1 1
qwen/finetuning/sft_qwen_14b.sh 1 2 1 2048 128 1 1 1
qwen/finetuning/sft_qwen_72b.sh 2 8 1 2048 128 1 1 1
qwen/finetuning/sft_qwen_7b.sh 1 1 1 2048 128 1 1 1
qwen/pretrain/pretrain_qwen_1.8b.sh 1 1 1 2048 2048 1 1 0
qwen/pretrain/pretrain_qwen_14b.sh 1 2 1 2048 2048 1 1 0
qwen/pretrain/pretrain_qwen_72b.sh 2 8 1 2048 2048 1 1 0
qwen/pretrain/pretrain_qwen_7b.sh 1 1 1 2048 2048 1 1 0
qwen1.5/finetuning/sft_qwen1.5_0.5b.sh 1 1 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_1.8b.sh 1 1 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_14b.sh 1 2 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_32b.sh 2 4 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_4b.sh 1 1 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_72b.sh 2 8 1 2048 128 1 1 1
qwen1.5/finetuning/sft_qwen1.5_7b.sh 1 1 1 2048 128 1 1 1
qwen1.5/pretrain/pretrain_qwen1.5_0.5b.sh 1 1 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_1.8b.sh 1 1 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_14b.sh 1 2 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_32b.sh 2 4 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_4b.sh 1 1 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_72b.sh 2 8 1 2048 2048 1 1 0
qwen1.5/pretrain/pretrain_qwen1.5_7b.sh 1 1 1 2048 2048 1 1 0
qwen2.5/finetuning/sft_qwen2.5_0.5b.sh 1 1 1 4096 128 4 1 1
qwen2.5/finetuning/sft_qwen2.5_1.5b.sh 1 1 1 4096 128 4 1 1
qwen2.5/finetuning/sft_qwen2.5_14b.sh 2 1 1 4096 128 1 1 1
qwen2.5/finetuning/sft_qwen2.5_32b.sh 2 4 1 4096 128 1 1 1
qwen2.5/finetuning/sft_qwen2.5_3b.sh 1 1 1 4096 128 2 1 1
qwen2.5/finetuning/sft_qwen2.5_72b.sh 4 8 1 4096 128 1 1 1
qwen2.5/finetuning/sft_qwen2.5_7b.sh 1 1 1 4096 128 1 1 1
qwen2.5/pretrain/pretrain_qwen2.5_0.5b.sh 1 1 1 4096 1024 4 1 0
qwen2.5/pretrain/pretrain_qwen2.5_1.5b.sh 1 1 1 4096 1024 4 1 0
qwen2.5/pretrain/pretrain_qwen2.5_14b.sh 2 1 1 4096 1024 1 1 0
qwen2.5/pretrain/pretrain_qwen2.5_32b.sh 2 4 1 4096 1024 1 1 0
qwen2.5/pretrain/pretrain_qwen2.5_3b.sh 1 1 1 4096 1024 2 1 0
qwen2.5/pretrain/pretrain_qwen2.5_72b.sh 4 8 1 4096 1024 1 1 0
qwen2.5/pretrain/pretrain_qwen2.5_7b.sh 1 1 1 4096 1024 1 1 0
qwen2/finetuning/sft_qwen2_0.5b.sh 1 1 1 2048 128 1 1 1
qwen2/finetuning/sft_qwen2_1.5b.sh 1 1 1 2048 128 1 1 1
qwen2/finetuning/sft_qwen2_72b.sh 4 8 1 2048 128 1 1 1
qwen2/finetuning/sft_qwen2_7b.sh 1 1 1 2048 128 1 1 1
qwen2/pretrain/pretrain_qwen2_0.5b.sh 1 1 1 4096 1024 4 1 0
qwen2/pretrain/pretrain_qwen2_1.5b.sh 1 1 1 4096 1024 2 1 0
qwen2/pretrain/pretrain_qwen2_72b.sh 4 8 1 4096 1024 1 1 0
qwen2/pretrain/pretrain_qwen2_7b.sh 1 1 1 4096 1024 1 1 0
qwen3/finetuning/sft_qwen3_0.6b.sh 1 1 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_1.7b.sh 1 1 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_14b.sh 2 1 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_235b_a22b.sh 4 8 16 131072 128 1 1 0
qwen3/finetuning/sft_qwen3_30b_a3b.sh 2 2 4 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_32b.sh 4 4 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_480b_a35b.sh 8 8 16 131072 128 1 1 0
qwen3/finetuning/sft_qwen3_4b.sh 1 1 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_8b.sh 1 1 1 4096 128 1 1 1
qwen3/finetuning/sft_qwen3_coder_30b_a3b.sh 2 2 4 4096 128 1 1 0
qwen3/pretrain/pretrain_qwen3_0.6b.sh 1 1 1 4096 1024 4 1 0
qwen3/pretrain/pretrain_qwen3_1.7b.sh 1 1 1 4096 1024 4 1 0
qwen3/pretrain/pretrain_qwen3_14b.sh 2 1 1 4096 1024 1 1 0
qwen3/pretrain/pretrain_qwen3_235b_a22b.sh 4 8 16 32768 128 1 0 0
qwen3/pretrain/pretrain_qwen3_30b_a3b.sh 2 2 4 4096 1024 1 1 0
qwen3/pretrain/pretrain_qwen3_32b.sh 4 4 1 4096 1024 1 1 0
qwen3/pretrain/pretrain_qwen3_480b_a35b.sh 8 8 16 4096 1024 1 0 0
qwen3/pretrain/pretrain_qwen3_4b.sh 1 1 1 4096 1024 4 1 0
qwen3/pretrain/pretrain_qwen3_8b.sh 1 1 1 4096 1024 1 1 0
qwen3/pretrain/pretrain_qwen3_coder_30b_a3b.sh 2 2 4 4096 1024 1 1 0
"""
CONFIGS_TEXT = """\
baichuan-13b baichuan-7b baichuan2-13b baichuan2-7b codellama-34b codellama-70b codellama-7b
deepseek-v2-lite deepseek-v2 deepseek-v3 llama-65b llama-7b llama2-13b llama2-70b llama2-7b
llama3-70b llama3-8b llama3.1-405b llama3.1-70b llama3.1-8b mixtral-8x22b mixtral-8x7b qwen-1.8b
qwen-14b qwen-72b qwen-7b qwen1.5-0.5b qwen1.5-1.8b qwen1.5-14b qwen1.5-32b qwen1.5-4b qwen1.5-72b
qwen1.5-7b qwen2-0.5b qwen2-1.5b qwen2-72b qwen2-7b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-14b
qwen2.5-32b qwen2.5-3b qwen2.5-72b qwen2.5-7b qwen3-0.6b qwen3-1.7b qwen3-14b qwen3-235b-a22b
qwen3-30b-a3b qwen3-32b qwen3-480b-a35b qwen3-4b qwen3-8b qwen3-coder-30b-a3b
"""
CHAT_TEMPLATES = ("llama2", "llama2_zh", "llama3", "llama3.1", "baichuan", "baichuan2", "qwen", "mistral", "qwen2-vl",
                  "alpaca", "deepseek", "deepseek3")
# launcher (relative to the AIAK root) -> (TP, PP, EP, --seq-length)
LAUNCHERS = {f"examples/{p}": (int(tp), int(pp), int(ep), int(seq))
             for p, tp, pp, ep, seq, *_ in (line.split() for line in LAUNCHERS_TEXT.splitlines())}
# launcher -> (--global-batch-size, --micro-batch-size)
BATCHES = {f"examples/{p}": (int(gbs), int(mbs))
           for p, _, _, _, _, gbs, mbs, _, _ in (line.split() for line in LAUNCHERS_TEXT.splitlines())}
# launchers that save no checkpoint (--save commented out), and those without --is-tokenized-data
NO_SAVE = frozenset(f"examples/{line.split()[0]}" for line in LAUNCHERS_TEXT.splitlines() if line.split()[7] == "0")
NO_TOKENIZED = frozenset(f"examples/{line.split()[0]}" for line in LAUNCHERS_TEXT.splitlines()
                         if line.split()[8] == "0")
CONFIGS = frozenset(CONFIGS_TEXT.split())
