#!/usr/bin/env python3
"""Short chat exchanges in the Gemma 3 turn format, English and Chinese, written for the demo model.

Usage: chat_data.py DOCS_TRAIN_JSONL OUT_JSONL
Writes one {"src": "chat", "text": ...} line per conversation. Handwritten exchanges, plus
templated ones (arithmetic, SQL) and a few that quote the training corpus (Tang poems,
fortunes), so the model links the turn markers to text it has seen. Deterministic: a fixed seed.
"""
import json
import random
import re
import sys

SEED = 7

# --- handwritten, English -------------------------------------------------------------------
GREETINGS_EN = [
    ("Hi!", "Hello! How can I help you today?"),
    ("Hello", "Hello! What would you like to talk about?"),
    ("Hey there", "Hey! What can I do for you?"),
    ("Good morning!", "Good morning! I hope your day is off to a good start."),
    ("Good evening.", "Good evening! How can I help?"),
    ("Good night", "Good night! Sleep well."),
    ("How are you?", "I am fine, thank you. I am a small program, so every day is the same for me. How are you?"),
    ("How are you doing today?", "I am doing well, thanks for asking. What can I do for you?"),
    ("Who are you?", "I am gemlet-demo, a tiny language model that ships with gemlet. I was trained for a few minutes on old books, fortunes and a dictionary, so I know little and make many mistakes."),
    ("What is your name?", "My name is gemlet-demo. I am a very small demo model."),
    ("What can you do?", "I can continue a piece of text, answer very simple questions, do small sums and write short SQL queries. I am only a demo, so please check what I say."),
    ("Are you Gemma?", "No. I use the same architecture as Gemma 3, but I am a tiny model trained from scratch for the gemlet demo. A real Gemma model is far larger and far better."),
    ("Are you smart?", "Not very. I have only a few million parameters, so I am a demo, not an assistant you should rely on."),
    ("Thank you!", "You are welcome!"),
    ("Thanks a lot.", "Glad I could help."),
    ("Thanks, that was helpful.", "You are welcome. Ask me again any time."),
    ("Bye!", "Goodbye! Have a nice day."),
    ("See you later.", "See you later!"),
    ("Tell me a joke.", "Why did the computer go to the doctor? It had a virus."),
    ("Tell me another joke.", "Why do programmers prefer dark mode? Because light attracts bugs."),
    ("Can you help me?", "Of course. Tell me what you need."),
    ("I am bored.", "Maybe read a short poem, take a walk, or learn one new word today."),
    ("I feel tired.", "Then rest for a while. A short break often helps more than you expect."),
    ("What day is it today?", "I cannot see a clock or a calendar, so I do not know the date."),
    ("Do you speak Chinese?", "Yes, a little. 你好！我会说一点中文。"),
]

POLISH_EN = [
    ("me and him goes to school every days.", "He and I go to school every day."),
    ("i has a apple and two banana.", "I have an apple and two bananas."),
    ("She don't like coffee in the morning.", "She doesn't like coffee in the morning."),
    ("We was very happy to seen you yesterday.", "We were very happy to see you yesterday."),
    ("The meeting have been moved to tomorrow.", "The meeting has been moved to tomorrow."),
    ("their going to the park after lunch.", "They're going to the park after lunch."),
    ("Its a beautiful day, isnt it?", "It's a beautiful day, isn't it?"),
    ("I am agree with you.", "I agree with you."),
    ("He is more taller than his brother.", "He is taller than his brother."),
    ("Please borrow me your pen.", "Please lend me your pen."),
    ("I look forward to hear from you.", "I look forward to hearing from you."),
    ("Less people came than we expected.", "Fewer people came than we expected."),
    ("The data shows that sales goes up.", "The data show that sales are going up."),
    ("Between you and I, the plan is weak.", "Between you and me, the plan is weak."),
    ("I have went there many times.", "I have been there many times."),
    ("Can you explain me this problem?", "Can you explain this problem to me?"),
    ("He said me that he was busy.", "He told me that he was busy."),
    ("There is many reasons for this.", "There are many reasons for this."),
    ("I didn't saw anything.", "I didn't see anything."),
    ("The report was wrote by our team.", "The report was written by our team."),
    ("Thanks for you help with the project.", "Thank you for your help with the project."),
    ("we need to discuss about the budget", "We need to discuss the budget."),
    ("The book what I read was good.", "The book that I read was good."),
    ("Every students must bring their ID.", "Every student must bring an ID."),
    ("It was a very very good movie.", "It was an excellent movie."),
    ("I will call you when I will arrive.", "I will call you when I arrive."),
    ("He can sings very well.", "He can sing very well."),
    ("My sister is working here since 2019.", "My sister has been working here since 2019."),
    ("Despite of the rain, we went out.", "Despite the rain, we went out."),
    ("The weather is good so we go to beach.", "The weather is good, so we are going to the beach."),
    ("In my opinion I think this is right.", "I think this is right."),
    ("The results was not good enough.", "The results were not good enough."),
    ("please find attach the file", "Please find the file attached."),
    ("I am writing to inform that the order is late.", "I am writing to let you know that the order is late."),
    ("Due to the fact that it rained, the game was cancelled.", "Because it rained, the game was cancelled."),
    ("At this point in time we are not able to help.", "We cannot help right now."),
]
POLISH_PROMPTS_EN = [
    "Polish this sentence: {}",
    "Fix the grammar: {}",
    "Please correct this sentence: {}",
    "Make this sentence better: {}",
    "Can you improve this sentence? {}",
]

FACTS_EN = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("What is the capital of Japan?", "The capital of Japan is Tokyo."),
    ("What is the capital of China?", "The capital of China is Beijing."),
    ("How many days are in a week?", "There are seven days in a week."),
    ("How many months are in a year?", "There are twelve months in a year."),
    ("How many minutes are in an hour?", "There are sixty minutes in an hour."),
    ("What color is the sky?", "On a clear day the sky is blue."),
    ("What is water made of?", "Water is made of hydrogen and oxygen: H2O."),
    ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet."),
    ("What is the opposite of hot?", "The opposite of hot is cold."),
    ("What is the opposite of happy?", "The opposite of happy is sad."),
    ("Give me a synonym for big.", "Large, huge or great."),
    ("Give me a synonym for quick.", "Fast, rapid or swift."),
    ("What is a noun?", "A noun is a word that names a person, place, thing or idea, such as \"city\" or \"love\"."),
    ("What is a verb?", "A verb is a word for an action or a state, such as \"run\" or \"be\"."),
    ("Translate \"thank you\" into Chinese.", "谢谢。"),
    ("Translate \"good morning\" into Chinese.", "早上好。"),
    ("Translate \"I love reading\" into Chinese.", "我喜欢读书。"),
    ("How do you say \"hello\" in Chinese?", "你好 (nǐ hǎo)."),
    ("What does SQL stand for?", "SQL stands for Structured Query Language. It is used to read and change data in a database."),
    ("What is a prime number?", "A prime number is a whole number greater than 1 that has no divisors other than 1 and itself, such as 2, 3, 5, 7 and 11."),
    ("Is 7 a prime number?", "Yes. 7 can only be divided by 1 and 7."),
    ("Is 9 a prime number?", "No. 9 = 3 × 3."),
    ("What is an even number?", "An even number can be divided by 2 with nothing left over, such as 2, 4 or 10."),
    ("Write a haiku about the sea.", "Waves fold into foam,\nthe grey gull rides on the wind,\nsalt upon my lips."),
    ("Write a short poem about the moon.", "The quiet moon climbs high,\na silver lamp in the sky,\nit watches while we sleep."),
    ("Give me a word that rhymes with cat.", "Hat, bat or mat."),
    ("Give me a word that rhymes with light.", "Night, bright or kite."),
    ("Give me some advice.", "Sleep enough, drink water, and be kind to the people around you."),
    ("Say something wise.", "A journey of a thousand miles begins with a single step."),
]

# --- handwritten, Chinese -------------------------------------------------------------------
GREETINGS_ZH = [
    ("你好", "你好！有什么可以帮你的吗？"),
    ("你好！", "你好！今天想聊点什么？"),
    ("早上好", "早上好！祝你今天一切顺利。"),
    ("晚上好", "晚上好！有什么需要帮忙的吗？"),
    ("晚安", "晚安，祝你好梦。"),
    ("你好吗？", "我很好，谢谢！你呢？"),
    ("你是谁？", "我是 gemlet-demo，gemlet 自带的一个很小的演示语言模型。我只训练了几分钟，懂得不多，经常会出错。"),
    ("你叫什么名字？", "我叫 gemlet-demo，是一个很小的演示模型。"),
    ("你会做什么？", "我可以续写文字，回答很简单的问题，算一些小算术，写简单的 SQL 查询。我只是一个演示模型，请核对我的回答。"),
    ("你是 Gemma 吗？", "不是。我和 Gemma 3 用的是同样的结构，但我是为 gemlet 演示从零训练的小模型，真正的 Gemma 模型大得多，也好得多。"),
    ("谢谢", "不客气！"),
    ("谢谢你的帮助。", "不用谢，很高兴能帮上忙。"),
    ("再见", "再见！祝你愉快。"),
    ("给我讲个笑话。", "为什么程序员喜欢深色模式？因为光会招来虫子（bug）。"),
    ("我有点累。", "那就休息一下吧，喝杯水，闭上眼睛放松几分钟。"),
    ("你会说英语吗？", "会一点。Hello! I can speak a little English."),
    ("今天天气怎么样？", "我看不到窗外，也查不了天气预报，所以不知道今天的天气。"),
    ("你能帮我吗？", "当然可以，请告诉我你需要什么。"),
]

POLISH_ZH = [
    ("我今天很忙所以没有时间去吃饭了。", "我今天太忙了，没来得及吃饭。"),
    ("这个问题我们需要进行一个讨论。", "这个问题我们需要讨论一下。"),
    ("他的成绩提高得非常很快。", "他的成绩提高得很快。"),
    ("通过这次活动，使我学到了很多。", "这次活动让我学到了很多。"),
    ("我们要认真的学习。", "我们要认真地学习。"),
    ("大约有一百个左右的人参加了会议。", "大约有一百人参加了会议。"),
    ("他穿着一件红色的上衣和一顶帽子。", "他穿着一件红色的上衣，戴着一顶帽子。"),
    ("我对这个电影很感兴趣的。", "我对这部电影很感兴趣。"),
    ("明天的会议请大家准时的参加。", "请大家准时参加明天的会议。"),
    ("由于下雨的原因，比赛取消了。", "由于下雨，比赛取消了。"),
    ("我的家乡是一个美丽的地方的城市。", "我的家乡是一座美丽的城市。"),
    ("他们在公园里愉快的玩着。", "他们在公园里愉快地玩着。"),
    ("这本书的内容很丰富多彩的。", "这本书的内容丰富多彩。"),
    ("我们应该尽量避免不犯错误。", "我们应该尽量避免犯错误。"),
    ("他把作业做完了以后就去睡觉。", "他做完作业就去睡觉了。"),
    ("学习外语的方法有很多种的方法。", "学习外语的方法有很多。"),
    ("请你把这个文件发给我一下。", "请把这个文件发给我。"),
    ("听了老师的话，使我很感动。", "老师的话让我很感动。"),
    ("我非常很喜欢读书。", "我非常喜欢读书。"),
    ("这家饭店的菜又好吃又便宜又好。", "这家饭店的菜又好吃又便宜。"),
]
POLISH_PROMPTS_ZH = [
    "请帮我润色这句话：{}",
    "请修改这个句子：{}",
    "这句话怎么说更通顺？{}",
    "帮我改一下这句话：{}",
]

FACTS_ZH = [
    ("中国的首都是哪里？", "中国的首都是北京。"),
    ("一年有几个月？", "一年有十二个月。"),
    ("一天有多少个小时？", "一天有二十四个小时。"),
    ("水是由什么组成的？", "水由氢和氧组成，化学式是 H2O。"),
    ("《静夜思》的作者是谁？", "《静夜思》的作者是唐代诗人李白。"),
    ("李白是哪个朝代的诗人？", "李白是唐代的诗人，被称为“诗仙”。"),
    ("杜甫是谁？", "杜甫是唐代的诗人，被称为“诗圣”。"),
    ("“谢谢”用英语怎么说？", "Thank you."),
    ("“你好”用英语怎么说？", "Hello."),
    ("把“我喜欢喝茶”翻译成英文。", "I like drinking tea."),
    ("什么是质数？", "质数是大于 1 的整数，除了 1 和它本身以外没有别的因数，例如 2、3、5、7、11。"),
    ("SQL 是什么？", "SQL 是结构化查询语言，用来查询和修改数据库中的数据。"),
    ("给我一句励志的话。", "千里之行，始于足下。"),
    ("“高兴”的反义词是什么？", "“高兴”的反义词是“难过”。"),
    ("“大”的反义词是什么？", "“大”的反义词是“小”。"),
    ("请写一句关于春天的诗。", "春风又绿江南岸，明月何时照我还。"),
    ("请背诵《静夜思》。", "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。"),
    ("请背诵《春晓》。", "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。"),
]

# --- templated --------------------------------------------------------------------------------
TABLES = [
    ("users", "user", "用户", [("age", "age", "年龄"), ("city", "city", "城市")], "name"),
    ("employees", "employee", "员工", [("salary", "salary", "工资"), ("department", "department", "部门")], "name"),
    ("products", "product", "商品", [("price", "price", "价格"), ("category", "category", "类别")], "name"),
    ("books", "book", "书", [("year", "year", "出版年份"), ("author", "author", "作者")], "title"),
    ("orders", "order", "订单", [("amount", "amount", "金额"), ("status", "status", "状态")], "id"),
]
CITIES = ["London", "Paris", "Tokyo", "Beijing", "Boston", "Berlin"]
CATEGORIES = ["books", "toys", "food", "tools"]
DEPTS = ["sales", "research", "support"]


def sql_exchanges(rng):
    out = []
    for table, one, zh, cols, key in TABLES:
        num = cols[0][0]
        text = cols[1][0]
        n = rng.choice([10, 20, 30, 50, 100, 1990, 2000])
        out.append((f"Write a SQL query to get all {table} with {num} greater than {n}.",
                    f"SELECT * FROM {table} WHERE {num} > {n};"))
        out.append((f"How do I count the rows in the {table} table?",
                    f"SELECT COUNT(*) FROM {table};"))
        k = rng.choice([3, 5, 10])
        out.append((f"Write SQL to find the {k} {table} with the highest {num}.",
                    f"SELECT * FROM {table} ORDER BY {num} DESC LIMIT {k};"))
        out.append((f"Write a SQL query that shows the average {num} of {table} for each {text}.",
                    f"SELECT {text}, AVG({num}) FROM {table} GROUP BY {text};"))
        out.append((f"写一个 SQL 查询，找出{cols[0][2]}大于 {n} 的{zh}。",
                    f"SELECT * FROM {table} WHERE {num} > {n};"))
        out.append((f"怎样统计 {table} 表里有多少行？",
                    f"SELECT COUNT(*) FROM {table};"))
        out.append((f"用 SQL 按{cols[1][2]}统计{zh}的数量。",
                    f"SELECT {text}, COUNT(*) FROM {table} GROUP BY {text};"))
    out.append(("Write a SQL query to list the names of users who live in Paris.",
                "SELECT name FROM users WHERE city = 'Paris';"))
    out.append(("Write a SQL query to delete the orders with status 'cancelled'.",
                "DELETE FROM orders WHERE status = 'cancelled';"))
    out.append(("Write SQL to add a user named Alice, aged 30, from London.",
                "INSERT INTO users (name, age, city) VALUES ('Alice', 30, 'London');"))
    out.append(("Write SQL to raise every salary in the sales department by 10 percent.",
                "UPDATE employees SET salary = salary * 1.1 WHERE department = 'sales';"))
    out.append(("Write a SQL query that joins orders with users.",
                "SELECT orders.id, users.name, orders.amount FROM orders JOIN users ON orders.user_id = users.id;"))
    out.append(("Write SQL to find the total amount of all orders.",
                "SELECT SUM(amount) FROM orders;"))
    out.append(("写一个 SQL 查询，列出住在北京的用户的名字。",
                "SELECT name FROM users WHERE city = 'Beijing';"))
    out.append(("用 SQL 删除状态为 cancelled 的订单。",
                "DELETE FROM orders WHERE status = 'cancelled';"))
    for _ in range(10):
        c = rng.choice(CITIES)
        lo = rng.randint(18, 40)
        out.append((f"Write a SQL query to get the names of users from {c} older than {lo}.",
                    f"SELECT name FROM users WHERE city = '{c}' AND age > {lo};"))
        cat = rng.choice(CATEGORIES)
        p = rng.choice([5, 10, 20, 50])
        out.append((f"Write SQL to list the {cat} products cheaper than {p} dollars, cheapest first.",
                    f"SELECT name, price FROM products WHERE category = '{cat}' AND price < {p} ORDER BY price;"))
        d = rng.choice(DEPTS)
        out.append((f"写一个 SQL 查询，列出 {d} 部门的员工，按工资从高到低排序。",
                    f"SELECT name, salary FROM employees WHERE department = '{d}' ORDER BY salary DESC;"))
    return out


def math_exchanges(rng):
    out = []
    for _ in range(36):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        kind = rng.randrange(6)
        if kind == 0:
            out.append((rng.choice(["What is {} + {}?", "Add {} and {}.", "Compute {} + {}."]).format(a, b), f"{a} + {b} = {a + b}."))
        elif kind == 1:
            a, b = max(a, b), min(a, b)
            out.append((rng.choice(["What is {} - {}?", "Subtract {1} from {0}."]).format(a, b), f"{a} - {b} = {a - b}."))
        elif kind == 2:
            a, b = a % 13 + 2, b % 13 + 2
            out.append((rng.choice(["What is {} times {}?", "What is {} × {}?", "Multiply {} by {}."]).format(a, b), f"{a} × {b} = {a * b}."))
        elif kind == 3:
            b = b % 9 + 2
            q = a % 20 + 2
            out.append((f"What is {q * b} divided by {b}?", f"{q * b} ÷ {b} = {q}."))
        elif kind == 4:
            c = a + b
            out.append((f"Solve for x: x + {a} = {c}.", f"Subtract {a} from both sides: x = {c} - {a} = {b}."))
        else:
            k = a % 9 + 2
            c = k * b
            out.append((f"Solve for x: {k}x = {c}.", f"Divide both sides by {k}: x = {c} ÷ {k} = {b}."))
    for _ in range(10):
        p = rng.choice([10, 20, 25, 50])
        n = rng.choice([40, 60, 80, 120, 200])
        out.append((f"What is {p}% of {n}?", f"{p}% of {n} = {p / 100:g} × {n} = {p * n // 100}."))
    for _ in range(8):
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(2, 20)
        out.append((f"What is {a} × {b} + {c}? Show the steps.",
                    f"First multiply: {a} × {b} = {a * b}. Then add: {a * b} + {c} = {a * b + c}."))
    for _ in range(6):
        w, h = rng.randint(2, 15), rng.randint(2, 15)
        out.append((f"A rectangle is {w} cm wide and {h} cm long. What is its area?",
                    f"Area = width × length = {w} × {h} = {w * h} square centimetres."))
    for _ in range(6):
        n = rng.randint(2, 9)
        p = rng.randint(2, 20)
        out.append((f"Tom buys {n} pens at {p} dollars each. How much does he pay?",
                    f"{n} × {p} = {n * p}, so he pays {n * p} dollars."))
    for _ in range(20):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        kind = rng.randrange(5)
        if kind == 0:
            out.append((rng.choice(["{} 加 {} 等于多少？", "计算 {} + {}。"]).format(a, b), f"{a} + {b} = {a + b}。"))
        elif kind == 1:
            a, b = max(a, b), min(a, b)
            out.append((f"{a} 减 {b} 等于多少？", f"{a} - {b} = {a - b}。"))
        elif kind == 2:
            a, b = a % 13 + 2, b % 13 + 2
            out.append((f"{a} 乘以 {b} 是多少？", f"{a} × {b} = {a * b}。"))
        elif kind == 3:
            c = a + b
            out.append((f"解方程：x + {a} = {c}。", f"两边同时减去 {a}：x = {c} - {a} = {b}。"))
        else:
            n, p = a % 8 + 2, b % 15 + 2
            out.append((f"一支笔 {p} 元，买 {n} 支要多少钱？", f"{n} × {p} = {n * p}，一共 {n * p} 元。"))
    return out


def corpus_exchanges(rng, docs_path):
    """Questions answered with text from the training corpus itself."""
    poems, sayings, devil = [], [], []
    with open(docs_path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            t = d["text"]
            if d["src"] == "fortunes-zh" and t.startswith("《") and "\n作者：" in t:
                lines = t.split("\n")
                if 3 <= len(lines) <= 6:
                    poems.append((lines[0], lines[1][3:], "\n".join(lines[2:])))
            elif d["src"] == "fortunes" and 30 <= len(t) <= 140 and "\n-- " in t and t.count("\n") == 1:
                sayings.append(t)
            elif d["src"] == "devil" and len(t) <= 160 and t.count(".") <= 3:
                devil.append(t)
    out = []
    for title, author, body in rng.sample(poems, min(40, len(poems))):
        q = rng.choice(["请背诵{a}的{t}。", "背一首{a}的诗：{t}", "{t}的全文是什么？", "请写出{a}的{t}。"])
        out.append((q.format(a=author, t=title), body))
    for t in rng.sample(sayings, min(20, len(sayings))):
        out.append((rng.choice(["Tell me a quote.", "Tell me something wise.", "Give me a famous saying.", "Say something interesting."]), t))
    for t in rng.sample(devil, min(15, len(devil))):
        word = re.split(r"[,.]", t)[0].strip().lower()
        out.append((f"How does The Devil's Dictionary define \"{word}\"?", t.replace("\n", " ")))
    return out


def turn(user, model):
    return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n{model}<end_of_turn>\n"


def main():
    rng = random.Random(SEED)
    singles = []
    singles += GREETINGS_EN + FACTS_EN + GREETINGS_ZH + FACTS_ZH
    for bad, good in POLISH_EN:
        singles.append((rng.choice(POLISH_PROMPTS_EN).format(bad), good))
    for bad, good in POLISH_ZH:
        singles.append((rng.choice(POLISH_PROMPTS_ZH).format(bad), good))
    singles += math_exchanges(rng)
    singles += sql_exchanges(rng)
    singles += corpus_exchanges(rng, sys.argv[1])
    convs = [turn(u, m) for u, m in singles]
    # A few two- and three-turn conversations, so a second turn follows the first one's <end_of_turn>.
    for _ in range(60):
        k = rng.choice([2, 2, 3])
        convs.append("".join(turn(u, m) for u, m in rng.sample(singles, k)))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps({"src": "chat", "text": c}, ensure_ascii=False) + "\n")
    print(f"chat         {len(singles)} exchanges, {len(convs)} conversations, "
          f"{sum(len(c.encode()) for c in convs) / 1e3:.1f} kB")


if __name__ == "__main__":
    main()
