"""Chat templates in the formats of the families' Hub repos, written here (Jinja).

Each renders a list of ``{"role", "content"}`` messages whose content is a string or a list of
``{"type": "image"}`` / ``{"type": "text", "text": ...}`` parts, and the assistant's opening
when ``add_generation_prompt`` is set.
"""

# Parts of one message: images (as the family's placeholder), then texts.
_PARTS = (
    "{%- macro parts(m, image) -%}"
    "{%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}"
    "{%- for c in m['content'] if c['type'] == 'image' -%}{{ image }}{%- endfor -%}"
    "{%- for c in m['content'] if c['type'] == 'text' -%}{{ c['text'] }}{%- endfor -%}"
    "{%- endif -%}{%- endmacro -%}"
)

#: LLaVA-1.5: ``USER: <image>\n{text} ASSISTANT: {answer}</s>``.
LLAVA_15 = _PARTS + (
    "{%- for m in messages -%}"
    "{{ m['role'].upper() }}: {{ parts(m, '<image>\n') }}"
    "{%- if m['role'] == 'assistant' %}</s>{% endif %} "
    "{%- endfor -%}{%- if add_generation_prompt %}ASSISTANT:{% endif -%}"
)

#: LLaVA-NeXT on Mistral: ``[INST] <image>\n{text} [/INST] {answer}</s>``.
LLAVA_NEXT_MISTRAL = _PARTS + (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}[INST] {{ parts(m, '<image>\n') }} [/INST]"
    "{%- else %} {{ parts(m, '') }}</s>{%- endif -%}"
    "{%- endfor -%}"
)

#: ChatML with Qwen2-VL's vision markers (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).
QWEN2_VL = _PARTS + (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m['role'] }}\n"
    "{{ parts(m, '<|vision_start|><|image_pad|><|vision_end|>') }}<|im_end|>\n"
    "{%- endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)

#: ChatML with LLaVA-OneVision's ``<image>`` placeholder.
LLAVA_ONEVISION = _PARTS + (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m['role'] }}\n{{ parts(m, '<image>\n') }}<|im_end|>\n"
    "{%- endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)

#: ChatML with InternVL's ``<IMG_CONTEXT>`` placeholder (the processor expands it).
INTERNVL = _PARTS + (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m['role'] }}\n{{ parts(m, '<IMG_CONTEXT>\n') }}<|im_end|>\n"
    "{%- endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)

#: Gemma 3: ``<bos><start_of_turn>user\n<start_of_image>{text}<end_of_turn>\n``, then
#: ``<start_of_turn>model\n``.
GEMMA3 = _PARTS + (
    "{{ bos_token }}{%- for m in messages -%}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ parts(m, '<start_of_image>') }}<end_of_turn>\n"
    "{%- endfor -%}{%- if add_generation_prompt %}<start_of_turn>model\n{% endif -%}"
)

#: Idefics3 / SmolVLM: ``<|begin_of_text|>User:<image>{text}<end_of_utterance>\nAssistant:``.
IDEFICS3 = _PARTS + (
    "<|begin_of_text|>{%- for m in messages -%}"
    "{{ m['role'] | capitalize }}:{{ parts(m, '<image>') }}<end_of_utterance>\n"
    "{%- endfor -%}{%- if add_generation_prompt %}Assistant:{% endif -%}"
)

#: Llama 3.2 Vision (Mllama): header-delimited turns, ``<|image|>`` first, ``<|eot_id|>``.
MLLAMA = _PARTS + (
    "<|begin_of_text|>{%- for m in messages -%}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ parts(m, '<|image|>') }}<|eot_id|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif -%}"
)
